"""tiktoken_inc beside tiktoken and its exact peers, in one run: real text and adversarial runs.

The peers: toktok-rs, splintr-rs, quicktok-v1, rs-bpe and bpe-openai (the `bench` extra).

Every library that is importable and supports the encoding runs on the same input in the
same process; measurements alternate between libraries (the order rotating every round)
so that machine drift hits all of them alike, and each figure is the best of --repeat
rounds.  The garbage collector is off while timing, as timeit has it (--gc on keeps it
running; pathological/bench_gc.py compares the two).  Peers are optional: a library that
is not installed, or that lacks an encoding, shows as "n/a".

1. Real text: every corpus in ../shared/corpora (or --corpora DIR) for every encoding of
   --text-encodings, per document (the file split on blank lines, documents of at most
   64 KiB, one `encode_ordinary` call each) and as a whole file (one call).  The ids of
   every library are compared with tiktoken's; a difference prints a MISMATCH line, and a
   library that differs on a row is left out of that row's "fastest exact peer".
2. Pathological runs: one character repeated ("a", spaces, newlines, "0", "中", "😀",
   "ab", apostrophes) to 2^10, 2^12, ... 2^--max-exp bytes, for every encoding of
   --encodings.  A call that raises (tiktoken panics on long runs of spaces in o200k_base)
   is recorded as "fail"; after a failure, or after a single call slower than --budget
   seconds, the larger sizes of that family are skipped for that library.
3. Log-log plots of the pathological throughput (throughput.png: a panel per encoding;
   throughput_by_family.png: a panel per encoding and family) and the tables with the
   machine, the versions and the command (RESULTS.md), written to --output-dir.

    python pathological/bench_peers.py               # full run, ~15 minutes on 2 cores
    python pathological/bench_peers.py --quick       # smoke test, < 1 minute, temp dir
"""
from __future__ import annotations

import argparse
import datetime
import gc
import math
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_CORPORA = HERE.parent.parent / "shared" / "corpora"
ALL_ENCODINGS = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
PATHOLOGICAL_ENCODINGS = ["cl100k_base", "o200k_base"]
LIBRARIES = ["tiktoken", "rs-bpe", "bpe-openai", "toktok", "splintr", "quicktok", "tiktoken_inc"]
DISTRIBUTIONS = {  # library -> its PyPI distribution, for the versions line
    "tiktoken": "tiktoken", "rs-bpe": "rs_bpe", "bpe-openai": "bpe-openai", "toktok": "toktok-rs",
    "splintr": "splintr-rs", "quicktok": "quicktok-v1", "tiktoken_inc": "tiktoken_inc",
}
OURS = "tiktoken_inc"
FAMILIES = {"a": "a", "spaces": " ", "newlines": "\n", "digits": "0", "cjk": "中", "emoji": "😀", "ab": "ab", "apostrophes": "'"}
MAX_DOCUMENT_BYTES = 64 * 1024
SLOW_RUN_SECONDS = 2.0  # a library whose first call is slower than this is timed once only
FLAT_BASE_EXP = 12  # flatness = throughput at the largest size / throughput at 2^12
COMPARE_EXP = 22  # the pathological ratios to the other libraries are taken at 2^22

Encoder = Callable[[str], list]


@dataclass
class Outcome:
    """What one library did on one input: best seconds per call, or why there is none."""

    status: str = "ok"  # ok | fail | skip | n/a
    seconds: float = math.inf
    first_seconds: float = 0.0
    error: str = ""

    def mib_per_s(self, mib: float) -> Optional[float]:
        """Throughput in MiB/s, or None when the library has no timing here."""
        return mib / self.seconds if self.status == "ok" else None

    def cell(self, mib: float) -> str:
        """The table cell: MiB/s, or the status."""
        rate = self.mib_per_s(mib)
        return f"{rate:.1f}" if rate is not None else self.status


@dataclass
class Report:
    """Everything the run collects for RESULTS.md."""

    text_rows: list = field(default_factory=list)
    pathological: dict = field(default_factory=dict)  # (encoding, family, exp) -> {library: Outcome}
    mismatches: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # (library, error, label)
    notes: list = field(default_factory=list)
    inexact: dict = field(default_factory=dict)  # (encoding, family, exp) -> libraries whose ids differed


# --------------------------------------------------------------------------- libraries


def library_factories() -> dict[str, Callable[[str], Optional[Encoder]]]:
    """For each importable library, a function from an encoding name to its encoder (None if unsupported)."""
    factories: dict[str, Callable[[str], Optional[Encoder]]] = {}
    try:
        import tiktoken

        factories["tiktoken"] = lambda name: tiktoken.get_encoding(name).encode_ordinary
    except ImportError:
        pass
    try:
        from rs_bpe.bpe import openai as rs_openai

        def rs_bpe_encoder(name: str) -> Optional[Encoder]:
            constructor = getattr(rs_openai, name, None) if name in ("cl100k_base", "o200k_base") else None
            return constructor().encode if constructor else None

        factories["rs-bpe"] = rs_bpe_encoder
    except ImportError:
        pass
    try:
        import bpe_openai

        factories["bpe-openai"] = lambda name: bpe_openai.get_encoding(name).encode_ordinary
    except ImportError:
        pass
    try:
        import toktok

        # A new Tokenizer each time (not toktok._encoding's shared one): see Renewable.
        factories["toktok"] = lambda name: Renewable(lambda: toktok._Tokenizer(name, "").encode_ordinary)
    except ImportError:
        pass
    try:
        import splintr

        factories["splintr"] = lambda name: splintr.Tokenizer.from_pretrained(name).encode_ordinary
    except ImportError:
        pass
    try:
        import quicktok

        factories["quicktok"] = lambda name: quicktok.get_encoding(name).encode_ordinary
    except ImportError:
        pass
    import tiktoken_inc

    factories[OURS] = lambda name: tiktoken_inc.get_encoding(name).encode_ordinary
    return factories


class Renewable:
    """A library's encoder whose object renew() makes anew (outside the timed interval):
    for a library whose objects keep the pieces they have encoded, with no call that
    empties that cache.  toktok's Tokenizer does: on the English corpus a second pass
    over the same documents runs about twice as fast as the first (cl100k_base, 2-core
    machine: 0.115-0.137 s for a pass with a new Tokenizer, 0.069-0.074 s with one that
    has seen the documents; a whole file 0.10 s, then 0.05 s), and after one half of the
    corpus, the other half ran at 45-49 MiB/s the first time and 90-92 MiB/s the second.
    The calls of real text take `current(encoder)` once per call, so a document costs
    the library's own call and nothing more.
    """

    def __init__(self, make: Callable[[], Encoder]) -> None:
        self.make = make
        self.encode = make()

    def renew(self) -> None:
        self.encode = self.make()

    def __call__(self, text: str) -> object:
        return self.encode(text)


def current(encoder: Encoder) -> Encoder:
    """The function that encodes now: a Renewable's present object's, or the encoder itself."""
    return encoder.encode if isinstance(encoder, Renewable) else encoder


class Encoders:
    """Encoders per (library, encoding), built once; None when the library lacks the encoding."""

    def __init__(self) -> None:
        self.factories = library_factories()
        self.cache: dict[tuple[str, str], Optional[Encoder]] = {}

    def get(self, library: str, name: str) -> Optional[Encoder]:
        """The encoder, or None when the library is absent or does not support `name`."""
        key = (library, name)
        if key not in self.cache:
            factory = self.factories.get(library)
            try:
                self.cache[key] = factory(name) if factory else None
            except Exception:  # an unsupported encoding: every peer says so its own way
                if library in ("tiktoken", OURS):
                    raise
                self.cache[key] = None
        return self.cache[key]

    def for_encoding(self, name: str) -> dict[str, Optional[Encoder]]:
        """All libraries, in table order, for one encoding."""
        return {library: self.get(library, name) for library in LIBRARIES}

    def cache_resets(self, name: str, real_text: bool) -> dict[str, Callable[[], object]]:
        """For each library that keeps a cache of encoded pieces, the call that empties it.

        splintr keeps an LRU cache of chunks: timed on an input it has seen, it looks the
        whole run up instead of encoding it (thousands of MiB/s on a run of spaces it met
        a call before, about 5 MiB/s on one it has not).  toktok keeps the pieces it has
        encoded in each Tokenizer, with no call to empty them: its encoder is a
        Renewable, made anew before each timed call of real text.  Not before the calls
        of runs: a run's first call and the next take the same time (a run of 2^20
        spaces, "a" or newlines: within 6%), and a call of a short run is repeated
        thousands of times per measurement, each making a Tokenizer (0.14-0.30 s) anew.
        tiktoken_inc keeps the ids of short pieces that are no token, per thread
        (`Encoding.clear_cache` empties them).
        """
        resets: dict[str, Callable[[], object]] = {}
        ours = self.get(OURS, name)
        if ours is not None:
            resets[OURS] = ours.__self__.clear_cache
        splintr = self.get("splintr", name)
        if splintr is not None:
            resets["splintr"] = splintr.__self__.clear_cache
        toktok = self.get("toktok", name)
        if real_text and isinstance(toktok, Renewable):
            resets["toktok"] = toktok.renew
        return resets


def versions() -> dict[str, str]:
    """Installed versions of the benchmarked libraries and of Python."""
    found = {"Python": platform.python_version()}
    for distribution in [DISTRIBUTIONS[library] for library in LIBRARIES] + ["matplotlib"]:
        try:
            found[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            found[distribution] = "not installed"
    return found


# --------------------------------------------------------------------------- timing


def describe(error: BaseException) -> str:
    """A one-line description of an exception."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0][:120]}" if message else type(error).__name__


@dataclass
class Timing:
    """How measurements are taken: rounds, minimum length of one measurement, and the clock."""

    repeat: int = 3
    min_seconds: float = 0.1  # a measurement repeats the call until it lasts this long
    clock: str = "wall"  # wall: time.perf_counter; cpu: time.process_time (all threads of the process)
    collect: bool = False  # True: the garbage collector stays on while timing (as in most programs)
    cpu_ratio: dict = field(default_factory=dict)  # library -> highest CPU/wall ratio seen (>1: threads)
    resets: dict = field(default_factory=dict)  # library -> empties its cache of results (set per encoding)
    warm_caches: bool = False  # True: libraries keep their caches of results between timed calls

    def note_ratio(self, library: str, wall: float, cpu: float) -> None:
        """Remember the highest CPU/wall ratio of a library over measurements long enough to tell."""
        if wall >= 0.02:
            self.cpu_ratio[library] = max(self.cpu_ratio.get(library, 0.0), cpu / wall)


def timed_loop(
    function: Callable[[], object], number: int, collect: bool = False, reset: Optional[Callable[[], object]] = None
) -> tuple[float, float, object]:
    """Wall and CPU seconds per call over `number` calls, and the last result.

    The garbage collector is off, as timeit has it, unless `collect`.  With `reset`, it is
    called before every call, outside the timed intervals (each call is timed on its own).
    """
    was_enabled = gc.isenabled()
    if not collect:
        gc.disable()
    try:
        if reset is None:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(number):
                result = function()
            return (time.perf_counter() - wall) / number, (time.process_time() - cpu) / number, result
        wall = cpu = 0.0
        for _ in range(number):
            reset()
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            result = function()
            wall += time.perf_counter() - wall_start
            cpu += time.process_time() - cpu_start
        return wall / number, cpu / number, result
    finally:
        if was_enabled:
            gc.enable()


def measure(library: str, call: Callable[[], object], number: int, timing: Timing) -> tuple[float, object]:
    """Seconds per call on the chosen clock, and the result; records the CPU/wall ratio."""
    wall, cpu, result = timed_loop(call, number, timing.collect, timing.resets.get(library))
    timing.note_ratio(library, wall * number, cpu * number)
    return (cpu if timing.clock == "cpu" else wall), result


def compare(calls: dict[str, Optional[Callable[[], object]]], timing: Timing) -> tuple[dict[str, Outcome], dict[str, object]]:
    """Time every library's call on one input, alternating libraries, best of `timing.repeat` rounds.

    The first call of each library gives its result (for the id check) and calibrates how
    many calls make one measurement; it counts as a round itself when it is slower than
    SLOW_RUN_SECONDS, so slow cells are timed once.  The order of the libraries rotates
    every round.  Any exception, including tiktoken's PanicException (a BaseException),
    makes the outcome "fail".  A library with a cache of results (`timing.resets`) has it
    emptied before every call, so that no call finds the input already encoded.
    """
    outcomes: dict[str, Outcome] = {}
    results: dict[str, object] = {}
    numbers: dict[str, int] = {}
    for library, call in calls.items():
        if call is None:
            outcomes[library] = Outcome(status="n/a")
            continue
        try:
            seconds, results[library] = measure(library, call, 1, timing)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # noqa: BLE001 - PanicException is a BaseException
            outcomes[library] = Outcome(status="fail", error=describe(error))
            continue
        outcomes[library] = Outcome(first_seconds=seconds)
        if seconds > SLOW_RUN_SECONDS:
            outcomes[library].seconds = seconds
        else:
            numbers[library] = max(1, min(100_000, math.ceil(timing.min_seconds / max(seconds, 1e-7))))
    timed = list(numbers)
    for round_index in range(timing.repeat):
        shift = round_index % max(1, len(timed))
        for library in timed[shift:] + timed[:shift]:
            seconds, _ = measure(library, calls[library], numbers[library], timing)
            outcomes[library].seconds = min(outcomes[library].seconds, seconds)
    return outcomes, results


def first_difference(ours: list, theirs: list) -> str:
    """Where two id lists first differ, for a MISMATCH line."""
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"first difference at id {index}: {a} vs {b}"
    return f"lengths {len(ours)} vs {len(theirs)}"


def check_ids(results: dict[str, object], label: str, report: Report) -> set[str]:
    """Compare every library's ids with tiktoken's (tiktoken_inc's when tiktoken failed); print differences.

    Returns the libraries whose ids differ (left out of the row's fastest exact peer).
    """
    reference_name = "tiktoken" if "tiktoken" in results else OURS
    reference = results.get(reference_name)
    if reference is None:
        return set()
    inexact = set()
    for library, ids in results.items():
        if library == reference_name or ids == reference:
            continue
        inexact.add(library)
        if ids and isinstance(ids[0], list):  # per-document mode: count the documents that differ
            differing = sum(a != b for a, b in zip(ids, reference))
            detail = f"{differing} of {len(reference)} documents differ"
        else:
            detail = first_difference(ids, reference)
        line = f"MISMATCH {library} vs {reference_name}: {label}: {detail}"
        print(line, flush=True)
        report.mismatches.append(line)
    return inexact


def record_failures(outcomes: dict[str, Outcome], label: str, report: Report) -> None:
    """Keep the failures of one measurement for the report, and print them."""
    for library, outcome in outcomes.items():
        if outcome.status == "fail":
            print(f"FAIL {library}: {label}: {outcome.error}", flush=True)
            report.failures.append((library, outcome.error, label))


def failure_lines(report: Report) -> list[str]:
    """The failures grouped by library and error, one markdown item per group."""
    groups: dict[tuple[str, str], list[str]] = {}
    for library, error, label in report.failures:
        groups.setdefault((library, error), []).append(label)
    return [
        f"- {library}, `{error.replace('`', chr(39))}` ({len(labels)}): " + "; ".join(labels)
        for (library, error), labels in groups.items()
    ]


# --------------------------------------------------------------------------- real text


def corpus_files(directory: Path, names: Optional[list[str]]) -> list[Path]:
    """The corpus files to run on, in name order (MANIFEST.txt excluded)."""
    files = sorted(p for p in directory.glob("*.txt") if p.name != "MANIFEST.txt")
    if names:
        files = [p for p in files if p.stem in names]
    return files


def split_documents(text: str) -> tuple[list[str], int]:
    """The documents of a corpus (split on blank lines) up to 64 KiB, and how many larger ones were left out."""
    documents = [d for d in text.split("\n\n") if d]
    kept = [d for d in documents if len(d.encode("utf-8")) <= MAX_DOCUMENT_BYTES]
    return kept, len(documents) - len(kept)


def text_calls(encoders: dict[str, Optional[Encoder]], mode: str, text: str, documents: list[str]):
    """One zero-argument call per library for a real-text mode ("document" or "file")."""

    def per_document(encoder: Encoder) -> Callable[[], object]:
        def call() -> object:
            encode = current(encoder)
            return [encode(d) for d in documents]

        return call

    def whole_file(encoder: Encoder) -> Callable[[], object]:
        return lambda: current(encoder)(text)

    make = per_document if mode == "document" else whole_file
    return {library: make(encode) if encode else None for library, encode in encoders.items()}


def ratios(rates: dict[str, Optional[float]], inexact: frozenset = frozenset()) -> tuple[str, str]:
    """tiktoken_inc / tiktoken, and tiktoken_inc / the fastest other exact library (named), as table cells."""
    ours = rates.get(OURS)
    tiktoken_rate = rates.get("tiktoken")
    versus_tiktoken = f"{ours / tiktoken_rate:.2f}" if ours and tiktoken_rate else "–"
    others = {k: v for k, v in rates.items() if k != OURS and k not in inexact and v}
    if not ours or not others:
        return versus_tiktoken, "–"
    fastest = max(others, key=others.get)
    return versus_tiktoken, f"{ours / others[fastest]:.2f} ({fastest})"


def run_text(args: argparse.Namespace, encoders: Encoders, report: Report) -> None:
    """Part 1: every corpus × encoding × mode, all libraries alternating."""
    files = corpus_files(args.corpora, args.corpus)
    texts = {path.stem: path.read_text(encoding="utf-8") for path in files}
    for name in args.text_encodings:
        by_library = encoders.for_encoding(name)
        args.timing.resets = {} if args.timing.warm_caches else encoders.cache_resets(name, real_text=True)
        for corpus, text in texts.items():
            documents, left_out = split_documents(text)
            if left_out and name == args.text_encodings[0]:
                report.notes.append(f"{corpus}: {left_out} document(s) over 64 KiB left out of the per-document mode")
            for mode in ("document", "file"):
                chosen = documents if mode == "document" else [text]
                mib = sum(len(d.encode("utf-8")) for d in chosen) / 2**20
                label = f"{name} {corpus} {mode}"
                outcomes, results = compare(text_calls(by_library, mode, text, documents), args.timing)
                record_failures(outcomes, label, report)
                inexact = check_ids(results, label, report)
                del results
                rates = {library: outcome.mib_per_s(mib) for library, outcome in outcomes.items()}
                row = [name, corpus, mode, f"{mib:.2f}"] + [outcomes[lib].cell(mib) for lib in LIBRARIES]
                row += list(ratios(rates, frozenset(inexact)))
                report.text_rows.append(row)
                print("  ".join(row), flush=True)


# --------------------------------------------------------------------------- pathological runs


def sizes(min_exp: int, max_exp: int) -> list[int]:
    """The exponents of the pathological sizes: every second power of two, and the largest."""
    exponents = list(range(min_exp, max_exp + 1, 2))
    if exponents[-1] != max_exp:
        exponents.append(max_exp)
    return exponents


def pathological_text(unit: str, exp: int) -> str:
    """`unit` repeated to (at most) 2^exp UTF-8 bytes."""
    return unit * (2**exp // len(unit.encode("utf-8")))


def pathological_mib(family: str, exp: int) -> float:
    """Size in MiB of `pathological_text(FAMILIES[family], exp)`, without building it."""
    unit = len(FAMILIES[family].encode("utf-8"))
    return (2**exp // unit) * unit / 2**20


def run_pathological(args: argparse.Namespace, encoders: Encoders, report: Report) -> None:
    """Part 2: every family × size × encoding, all libraries alternating, with the budget rule."""
    for name in args.encodings:
        by_library = encoders.for_encoding(name)
        args.timing.resets = {} if args.timing.warm_caches else encoders.cache_resets(name, real_text=False)
        for family in args.families:
            stopped: dict[str, str] = {}  # library -> why its larger sizes are skipped
            for exp in sizes(args.min_exp, args.max_exp):
                text = pathological_text(FAMILIES[family], exp)
                calls = {
                    library: (lambda encode=current(encode): encode(text)) if encode and library not in stopped else None
                    for library, encode in by_library.items()
                }
                outcomes, results = compare(calls, args.timing)
                for library in stopped:
                    outcomes[library] = Outcome(status="skip", error=stopped[library])
                label = f"{name} {family} 2^{exp}"
                record_failures(outcomes, label, report)
                report.inexact[(name, family, exp)] = frozenset(check_ids(results, label, report))
                del results
                for library, outcome in outcomes.items():
                    if outcome.status == "fail":
                        stopped[library] = f"after the failure at 2^{exp}"
                    elif outcome.status == "ok" and outcome.first_seconds > args.budget:
                        stopped[library] = f"after a call of {outcome.first_seconds:.1f} s > budget"
                report.pathological[(name, family, exp)] = outcomes
                cells = "  ".join(f"{lib}={outcomes[lib].cell(pathological_mib(family, exp))}" for lib in LIBRARIES)
                print(f"{name} {family:<11} 2^{exp:<2} {cells}", flush=True)


def pathological_rate(report: Report, key: tuple, library: str) -> Optional[float]:
    """MiB/s of one library on one pathological input, or None."""
    outcomes = report.pathological.get(key)
    if outcomes is None:
        return None
    name, family, exp = key
    return outcomes[library].mib_per_s(pathological_mib(family, exp))


# --------------------------------------------------------------------------- output


def markdown_table(headers: list[str], rows: list[list[str]], text_columns: int) -> str:
    """A GitHub markdown table: the first `text_columns` left-aligned, the rest (numbers) right-aligned."""
    align = ["---" if i < text_columns else "---:" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_section(report: Report) -> str:
    """Part 1 as markdown."""
    headers = ["encoding", "corpus", "mode", "MiB"] + [f"{lib} MiB/s" for lib in LIBRARIES]
    headers += ["inc / tiktoken", "inc / fastest exact peer"]
    return markdown_table(headers, report.text_rows, text_columns=3)


def pathological_tables(args: argparse.Namespace, report: Report) -> str:
    """Part 2 as markdown: one table of MiB/s per encoding, a row per family and library."""
    exponents = sizes(args.min_exp, args.max_exp)
    parts = []
    for name in args.encodings:
        rows = []
        for family in args.families:
            for library in LIBRARIES:
                row = [family, library]
                for exp in exponents:
                    outcomes = report.pathological.get((name, family, exp), {})
                    cell = outcomes[library].cell(pathological_mib(family, exp)) if library in outcomes else "–"
                    row.append(cell)
                rows.append(row)
        headers = ["family", "library"] + [f"2^{e}" for e in exponents]
        parts.append(f"### {name} (MiB/s by input size in bytes)\n\n{markdown_table(headers, rows, text_columns=2)}")
    return "\n\n".join(parts)


def summary_rows(args: argparse.Namespace, report: Report) -> tuple[list[str], list[list[str]]]:
    """tiktoken_inc per family: flatness (largest size / 2^12) and ratios to the others at 2^22."""
    largest = args.max_exp
    base = FLAT_BASE_EXP if FLAT_BASE_EXP in sizes(args.min_exp, args.max_exp) else args.min_exp
    at = COMPARE_EXP if COMPARE_EXP in sizes(args.min_exp, args.max_exp) else largest
    headers = [
        "encoding", "family", f"inc MiB/s 2^{base}", f"inc MiB/s 2^{largest}", f"flatness 2^{largest}/2^{base}",
        f"inc / tiktoken at 2^{at}", f"inc / fastest exact peer at 2^{at}",
    ]
    rows = []
    for name in args.encodings:
        for family in args.families:
            small = pathological_rate(report, (name, family, base), OURS)
            big = pathological_rate(report, (name, family, largest), OURS)
            rates = {lib: pathological_rate(report, (name, family, at), lib) for lib in LIBRARIES}
            tiktoken_outcome = report.pathological.get((name, family, at), {}).get("tiktoken")
            versus_tiktoken, versus_fastest = ratios(rates, report.inexact.get((name, family, at), frozenset()))
            if versus_tiktoken == "–" and tiktoken_outcome is not None and tiktoken_outcome.status != "ok":
                reason = tiktoken_outcome.error.split(":")[0] if tiktoken_outcome.status == "fail" else tiktoken_outcome.error
                versus_tiktoken = f"tiktoken {tiktoken_outcome.status} ({reason})"
            rows.append([
                name, family, f"{small:.1f}" if small else "–", f"{big:.1f}" if big else "–",
                f"{big / small:.2f}" if small and big else "–", versus_tiktoken, versus_fastest,
            ])
    return headers, rows


COLOURS = {
    "tiktoken": "tab:red", "rs-bpe": "tab:green", "bpe-openai": "tab:orange", "toktok": "tab:purple",
    "splintr": "tab:brown", "quicktok": "tab:olive", OURS: "tab:blue",
}
MARKERS = dict(zip(FAMILIES, "osv^DP*X"))


def failure_row(report: Report) -> float:
    """Where failed calls are marked on the MiB/s axis: below every measured throughput."""
    rates = [
        pathological_rate(report, key, library) for key in report.pathological for library in LIBRARIES
    ]
    return min((r for r in rates if r), default=1.0) / 4


def draw_library(axis, args: argparse.Namespace, report: Report, name: str, family: str, library: str) -> None:
    """One library's throughput line for one family on one axis, failures marked with x."""
    exponents = sizes(args.min_exp, args.max_exp)
    points = [(2**e, pathological_rate(report, (name, family, e), library)) for e in exponents]
    points = [(x, y) for x, y in points if y]
    if points:
        xs, ys = zip(*points)
        axis.plot(xs, ys, color=COLOURS[library], marker=MARKERS[family], markersize=4, linewidth=1.2, alpha=0.85)
    statuses = {e: report.pathological.get((name, family, e), {}).get(library) for e in exponents}
    failed = [2**e for e, outcome in statuses.items() if outcome is not None and outcome.status == "fail"]
    if failed:
        height = failure_row(report) * 1.4 ** LIBRARIES.index(library)
        axis.scatter(failed, [height] * len(failed), color=COLOURS[library], marker="x", s=50, zorder=5)


def style_axis(axis, title: str, exponents: list[int]) -> None:
    """Log-log axes with a grid, x ticks at every second measured size."""
    axis.set_xscale("log", base=2)
    step = 2 if len(exponents) > 5 else 1
    axis.set_xticks([2**e for e in exponents[::step]], [f"$2^{{{e}}}$" for e in exponents[::step]])
    axis.set_yscale("log")
    axis.set_title(title, fontsize=10)
    axis.grid(True, which="both", alpha=0.3)


def library_legend(figure, anchor: tuple[float, float]) -> None:
    """The colour legend (one entry per library) at the top of a figure."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=COLOURS[lib], linewidth=2, label=lib) for lib in LIBRARIES]
    handles.append(Line2D([], [], color="black", marker="x", linestyle="none", label="call failed"))
    figure.legend(handles=handles, loc="upper center", bbox_to_anchor=anchor, ncol=len(handles), frameon=False)


def plot_overview(args: argparse.Namespace, report: Report, path: Path) -> None:
    """All families together: a panel per encoding, colour = library, marker = family."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = len(args.encodings)
    figure, axes = plt.subplots(1, panels, figsize=(7 * panels, 6.2), sharey=True, squeeze=False)
    for axis, name in zip(axes[0], args.encodings):
        for library in LIBRARIES:
            for family in args.families:
                draw_library(axis, args, report, name, family, library)
        style_axis(axis, f"{name}: one character repeated", sizes(args.min_exp, args.max_exp))
        axis.set_xlabel("input bytes")
    axes[0][0].set_ylabel("MiB/s (higher is better)")
    library_legend(figure, (0.5, 1.0))
    family_handles = [Line2D([], [], color="grey", marker=MARKERS[f], linestyle="none", label=f) for f in args.families]
    columns = len(family_handles) if panels > 1 else math.ceil(len(family_handles) / 2)
    figure.legend(handles=family_handles, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=columns, frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.9 if panels > 1 else 0.86))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_by_family(args: argparse.Namespace, report: Report, path: Path) -> None:
    """One small panel per encoding and family (four to a row), a line per library."""
    import matplotlib.pyplot as plt

    panels = [(name, family) for name in args.encodings for family in args.families]
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    height = 2.8 * rows + 0.5
    figure, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, height), sharex=True, sharey=True, squeeze=False)
    for index, axis in enumerate(axes.flat):
        if index >= len(panels):
            axis.set_visible(False)
            continue
        name, family = panels[index]
        for library in LIBRARIES:
            draw_library(axis, args, report, name, family, library)
        style_axis(axis, f"{name}: {family}", sizes(args.min_exp, args.max_exp))
        if index % columns == 0:
            axis.set_ylabel("MiB/s")
        if index >= len(panels) - columns:
            axis.set_xlabel("input bytes")
            axis.xaxis.set_tick_params(labelbottom=True)
    library_legend(figure, (0.5, 1.0))
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.45 / height))
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot(args: argparse.Namespace, report: Report, directory: Path) -> None:
    """Write throughput.png (a panel per encoding) and throughput_by_family.png (a panel per family)."""
    import matplotlib

    matplotlib.use("Agg")
    plot_overview(args, report, directory / "throughput.png")
    plot_by_family(args, report, directory / "throughput_by_family.png")


def machine() -> dict[str, str]:
    """nproc, CPU model and load average, for the report."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": str(len(os.sched_getaffinity(0))), "cpu": model, "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def timing_text(timing: Timing) -> str:
    """How the figures were measured, for RESULTS.md."""
    clock = "process CPU time" if timing.clock == "cpu" else "wall-clock time"
    collector = "on" if timing.collect else "off, as timeit has it"
    return (
        f"best of {timing.repeat} rounds of {clock} (garbage collector {collector}), libraries alternating within each round (order rotating); "
        f"small inputs are repeated until one measurement lasts {timing.min_seconds:g} s; a call slower than "
        f"{SLOW_RUN_SECONDS:g} s is timed once. "
        + ("Caches of results stay warm between calls (--warm-caches). " if timing.warm_caches else
           "splintr's chunk cache and tiktoken_inc's memos of short pieces (Encoding.clear_cache) are emptied before "
           "every timed call, outside the timed interval, and toktok, whose "
           "Tokenizer keeps the pieces it has encoded with no call to empty them, gets a new Tokenizer before every "
           "timed call of real text: a call (a pass over a corpus's documents, a whole file, a run) never finds its "
           "input already encoded, while a pass still reuses the pieces that repeat within it. ")
        + "On a small shared machine other processes add noise: differences of some per cent are not significant."
    )


def write_results(args: argparse.Namespace, report: Report, started: float, start_machine: dict, path: Path) -> None:
    """RESULTS.md: context, the tables, mismatches and failures."""
    end_machine = machine()
    minutes = (time.time() - started) / 60
    lines = [
        "# tiktoken_inc beside tiktoken and its peers",
        "",
        f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- Machine: nproc = {start_machine['nproc']}, {start_machine['cpu']}, {platform.system()} {platform.release()}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        f"- Command: `{shlex.join([Path(sys.executable).name] + sys.argv)}` (run from the repository root)",
        f"- Runtime: {minutes:.1f} min; load average at start {start_machine['load']}, at end {end_machine['load']}",
        f"- Timing: {timing_text(args.timing)}",
        "- Cells: MiB/s of UTF-8 input; `fail` = the call raised; `skip` = not run (larger than a failed "
        f"size, or than a size whose single call exceeded --budget = {args.budget:g} s); `n/a` = the library "
        "does not provide this encoding. Ratios are throughput ratios: above 1 means tiktoken_inc is faster; "
        "the fastest exact peer is the fastest other library whose ids equal tiktoken's on that input.",
        "",
    ]
    if report.text_rows:
        lines += ["## Real text (`encode_ordinary`)", "",
                  "`document`: the file split on blank lines, one call per document of at most 64 KiB; "
                  "`file`: the whole file in one call.", "", text_section(report), ""]
        lines += [f"- {note}" for note in report.notes] + ([""] if report.notes else [])
    if report.pathological:
        headers, rows = summary_rows(args, report)
        lines += ["## Pathological runs: tiktoken_inc summary", "",
                  "Flatness near 1 means throughput independent of the length of the run.", "",
                  markdown_table(headers, rows, text_columns=2), "", "![throughput](throughput.png)", "",
                  "Per family: [throughput_by_family.png](throughput_by_family.png)", "",
                  "## Pathological runs: all libraries", "", pathological_tables(args, report), ""]
    if args.timing.cpu_ratio:
        ratios_seen = ", ".join(f"{lib} {ratio:.2f}" for lib, ratio in sorted(args.timing.cpu_ratio.items()))
        lines += [f"Highest CPU/wall time ratio per library (above 1 would mean extra threads): {ratios_seen}.", ""]
    lines += ["## Id mismatches", ""] + ([f"- `{m}`" for m in report.mismatches] or ["None: every library gave tiktoken's ids."])
    lines += ["", "## Failures", ""] + (failure_lines(report) or ["None."])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- main


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options; --quick narrows everything to a smoke test."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes up to 2^16, one corpus, one encoding; output to a temp dir")
    parser.add_argument("--parts", nargs="+", choices=["text", "pathological"], default=["text", "pathological"])
    parser.add_argument("--text-encodings", nargs="+", default=ALL_ENCODINGS, help="encodings for the real-text part")
    parser.add_argument("--encodings", nargs="+", default=PATHOLOGICAL_ENCODINGS, help="encodings for the pathological part")
    parser.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA)
    parser.add_argument("--corpus", nargs="+", help="corpus names (file stems) to keep, e.g. english code")
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--min-exp", type=int, default=10)
    parser.add_argument("--max-exp", type=int, default=24)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds; a slower call stops the larger sizes")
    parser.add_argument("--repeat", type=int, help="rounds per measurement, best kept (default 3; --quick: 2)")
    parser.add_argument("--min-time", type=float, help="seconds one measurement lasts at least (default 0.1; --quick: 0.02)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall-clock or process CPU time")
    parser.add_argument(
        "--warm-caches", action="store_true",
        help="let libraries keep their caches of results between timed calls (splintr's chunk cache, toktok's "
        "Tokenizer, tiktoken_inc's memos of short pieces; default: emptied, or made anew, before each)",
    )
    parser.add_argument("--gc", choices=["off", "on"], default="off", help="the garbage collector while timing (default off, as timeit)")
    parser.add_argument("--output-dir", type=Path, help="where RESULTS.md and throughput.png go (default: pathological/)")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_exp = min(args.max_exp, 16)
        args.corpus = args.corpus or ["english"]
        args.text_encodings = ["cl100k_base"]
        args.encodings = ["cl100k_base"]
        args.output_dir = args.output_dir or Path(tempfile.mkdtemp(prefix="bench-peers-quick-"))
    quick = args.quick
    args.timing = Timing(
        repeat=args.repeat or (2 if quick else 3), min_seconds=args.min_time or (0.02 if quick else 0.1), clock=args.clock,
        collect=args.gc == "on", warm_caches=args.warm_caches,
    )
    args.output_dir = args.output_dir or HERE
    if args.min_exp > args.max_exp:
        parser.error("--min-exp must not exceed --max-exp")
    if "text" in args.parts and not corpus_files(args.corpora, args.corpus):
        parser.error(f"no corpora at {args.corpora}: pass --corpora DIR (or --parts pathological)")
    return args


def main() -> None:
    """Run the selected parts, then write the plot and RESULTS.md."""
    args = parse_args()
    started, start_machine = time.time(), machine()
    os.environ["RUST_BACKTRACE"] = "0"  # a tiktoken panic prints one line, not a backtrace
    cache = offline_tiktoken_cache()
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    try:
        encoders = Encoders()
        print("libraries found:", ", ".join(encoders.factories), flush=True)
        report = Report()
        if "text" in args.parts:
            run_text(args, encoders, report)
        if "pathological" in args.parts:
            run_pathological(args, encoders, report)
        args.output_dir.mkdir(parents=True, exist_ok=True)
        if report.pathological:
            plot(args, report, args.output_dir)
        write_results(args, report, started, start_machine, args.output_dir / "RESULTS.md")
        print(f"wrote {args.output_dir / 'RESULTS.md'} ({(time.time() - started) / 60:.1f} min)", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
