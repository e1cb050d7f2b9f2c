"""What a gateway sees: bounded counting, memory of one-shot vs streaming, hostile inputs.

(a) count_tokens(" " * 2**30, limit=1000) beside count_tokens(4 KiB of English, limit=1000),
    best of 5, for each encoding: the work is bounded by the limit, not by the input.
(b) Peak RSS (ru_maxrss, a fresh process per measurement) of a 256 MiB run of spaces or of
    "a": one-shot `encode_ordinary` against streaming `count_tokens` (no limit).
(c) The hostile-input matrix: runs of one character, random bytes decoded with
    errors="surrogateescape" (lone surrogates in a str), random Unicode, NUL characters, and
    invalid UTF-8 through `_encode_bytes`, at sizes up to --max-mib (64 by default; up to 1024
    for the counting APIs and 256 for the encoding ones).  Each (encoding, input, size) runs
    in its own process, so a crash would be reported, not suffered; the outcome of every API
    is printed: ok, or the exception's type and message.

(d) count_tokens(text) without a limit against len(encode_ordinary(text)) (the target:
    at most 1.1x, and no step at any size) for texts of 2^10 .. 2^26 bytes: English (the
    corpus repeated) and runs of spaces, "a" and "中"; tiktoken's len(encode(text)) beside
    where it finishes (up to --tiktoken-mib).
(e) The bounded calls -- count_tokens(text, limit=L), truncate(text, L) and
    encode(text, max_tokens=L) -- against encode_ordinary of the prefix they must read (the
    bytes the C call consumed, as it reports them; the target: at most 1.2x), for L = 1000
    and 100000 on English and on runs, at 2^22 and 2^26 bytes of text: the same time for any
    length past the prefix.  Its last column, `fresh`, times truncate on a new copy of the
    text each call, whose UTF-8 CPython has not made yet, as a gateway sees each prompt.

Sizes are MiB of UTF-8 (random Unicode: 1/4 as many code points, at most 4 bytes each).
(d) and (e) time with the process's CPU time, best of --repeat rounds, each ratio's sides
alternating within each round; a call shorter than 20 ms is timed in a loop of calls that lasts about that
long (the figure is per call), so that small texts are measured, not the timer.

    python pathological/bench_gateway.py [--max-mib 1024] [--encodings cl100k_base o200k_base]
    python pathological/bench_gateway.py --only d e
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import best_of_rounds, loop_timer  # noqa: E402

ENGLISH = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "english.txt"
COUNT_CAP_MIB = 1024
ENCODE_CAP_MIB = 256
SIZES_MIB = [1, 16, 64, 256, 1024]
LIMIT = 1000
INPUTS = ["run ' '", "run 'a'", "run '中'", "run '😀'", "surrogateescape", "random unicode", "NUL", "invalid utf-8"]


def best_of(call, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def english_4k() -> tuple[str, str]:
    """4 KiB of English from the corpora (or a stand-in if they are absent), and its source."""
    if ENGLISH.is_file():
        data = ENGLISH.read_bytes()[:4096].decode("utf-8", "ignore")
        return data, str(ENGLISH)
    sentence = "The quick brown fox jumps over the lazy dog, and then it runs away. "
    return (sentence * 64)[:4096], "a repeated sentence (corpora absent)"


# --------------------------------------------------------------------------- (a)


def part_a(encodings: list[str]) -> None:
    import tiktoken_inc

    english, source = english_4k()
    print(f"(a) count_tokens(..., limit={LIMIT}), best of 5; English: first 4 KiB of {source}")
    spaces = " " * 2**30
    print(f"    {'encoding':<12} {'input':<28} {'result':>7} {'ms':>9}")
    for name in encodings:
        enc = tiktoken_inc.get_encoding(name)
        rows = [
            ("4 KiB English", english, {}),
            ("1 GiB of spaces", spaces, {}),
            ("1 GiB of spaces, disallowed=()", spaces, {"disallowed_special": ()}),
        ]
        times = {}
        for label, text, kwargs in rows:
            result = enc.count_tokens(text, limit=LIMIT, **kwargs)
            times[label] = best_of(lambda: enc.count_tokens(text, limit=LIMIT, **kwargs))
            print(f"    {name:<12} {label:<28} {str(result):>7} {times[label] * 1e3:>9.3f}")
        ratio = times["1 GiB of spaces"] / times["4 KiB English"]
        print(f"    {name:<12} ratio 1 GiB spaces / 4 KiB English: {ratio:.1f}x (input 262144x larger)")
    del spaces
    print()


# --------------------------------------------------------------------------- (d), (e)


#: A timing of a short call covers this much CPU time at least (a loop of calls), so that a
#: call of microseconds is measured as well as one of milliseconds.
MIN_TIMING_SECONDS = 0.02


def cpu_best(call, repeat: int) -> float:
    """The best of `repeat` timings of call() in process CPU time (seconds per call): a call
    that takes less than MIN_TIMING_SECONDS is timed in a loop that lasts about that long."""
    start = time.process_time()
    call()
    once = time.process_time() - start
    calls = max(1, min(100_000, int(MIN_TIMING_SECONDS / max(once, 1e-7))))
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time() - start) / calls)
    return best


def cpu_best_rounds(calls: dict, repeat: int) -> dict:
    """cpu_best of each call (seconds per call), the calls alternating round by round, so
    that a slow stretch of a shared machine falls on both sides of a ratio alike."""
    loops = {}
    for key, call in calls.items():
        start = time.process_time()
        call()
        once = time.process_time() - start
        loops[key] = max(1, min(100_000, int(MIN_TIMING_SECONDS / max(once, 1e-7))))

    return best_of_rounds({key: loop_timer(call, loops[key]) for key, call in calls.items()}, repeat)[0]


def fresh_best(call, text: str, repeat: int) -> float:
    """The best of `repeat` timings of call(copy) in process CPU time, each on a new copy of
    `text` made before its timing starts: a str whose UTF-8 CPython has not made and kept yet
    (a gateway sees every prompt once), so that a call which converts the whole text to read
    its start shows it."""
    best = float("inf")
    for _ in range(max(repeat, 3)):
        copy = text[:-1] + text[-1:]
        start = time.process_time()
        call(copy)
        best = min(best, time.process_time() - start)
        del copy
    return best


def sized_text(kind: str, size: int) -> str:
    """`size` bytes of UTF-8 (about: whole characters) of English or a run of one character."""
    if kind == "English":
        english, _ = english_4k()
        base = ENGLISH.read_text(encoding="utf-8") if ENGLISH.is_file() else english
        return (base * (size // len(base.encode()) + 1)).encode()[:size].decode("utf-8", "ignore")
    char = kind[-2]  # "run ' '" -> " "
    return char * max(1, size // len(char.encode()))


def part_d(encodings: list[str], repeat: int, tiktoken_mib: int) -> None:
    import tiktoken_inc

    reference = _tiktoken()
    print("(d) count_tokens(text) against len(encode_ordinary(text)), process CPU time, best of "
          f"{repeat}; tiktoken's len(encode(text)) up to {tiktoken_mib} MiB")
    print(f"    {'encoding':<12} {'text':<10} {'bytes':>6} {'count ms':>10} {'encode ms':>10} {'ratio':>6} "
          f"{'tiktoken ms':>12}")
    for name in encodings:
        enc = tiktoken_inc.get_encoding(name)
        theirs = reference.get_encoding(name) if reference is not None else None
        for kind in ("English", "run ' '", "run 'a'", "run '中'"):
            for exponent in range(10, 27, 2):
                text = sized_text(kind, 1 << exponent)
                times = cpu_best_rounds({"count": lambda: enc.count_tokens(text),
                                         "encode": lambda: len(enc.encode_ordinary(text))}, repeat)
                count, encode = times["count"], times["encode"]
                tiktoken_ms = ""
                if theirs is not None and (1 << exponent) <= tiktoken_mib << 20:
                    try:
                        tiktoken_ms = f"{cpu_best(lambda: len(theirs.encode(text)), 1) * 1e3:.2f}"
                    except BaseException as error:  # tiktoken's PanicException is a BaseException
                        tiktoken_ms = type(error).__name__
                print(f"    {name:<12} {kind:<10} 2^{exponent:<4} {count * 1e3:>10.3f} {encode * 1e3:>10.3f} "
                      f"{count / encode:>6.2f} {tiktoken_ms:>12}", flush=True)
    print()


def part_e(encodings: list[str], repeat: int) -> None:
    import tiktoken_inc

    print("(e) bounded calls against encode_ordinary of the prefix they read, process CPU time, best of "
          f"{repeat}")
    print("    fresh: truncate on a new copy of the text each call (a str whose UTF-8 CPython has not made yet)")
    print(f"    {'encoding':<12} {'text':<10} {'bytes':>6} {'limit':>7} {'read':>9} {'prefix ms':>10} "
          f"{'count':>7} {'truncate':>9} {'max_tokens':>10} {'fresh':>7}")
    for name in encodings:
        enc = tiktoken_inc.get_encoding(name)
        core = enc._core_bpe
        for kind in ("English", "run ' '", "run 'a'", "run '中'"):
            for exponent in (22, 26):
                text = sized_text(kind, 1 << exponent)
                for limit in (1000, 100_000):
                    allowed, refused = enc._special_sets(frozenset(), "all")
                    read = core._vocab.bounded(core._native_pattern, core._matcher(allowed), core._refusal(refused)[0],
                                               text, limit, False)[3]
                    prefix = text.encode()[:read].decode("utf-8", "ignore")
                    def capped() -> None:
                        try:
                            enc.encode(text, max_tokens=limit)
                        except tiktoken_inc.TokenLimitError:
                            pass

                    times = cpu_best_rounds({"base": lambda: enc.encode_ordinary(prefix),
                                             "count": lambda: enc.count_tokens(text, limit=limit),
                                             "truncate": lambda: enc.truncate(text, limit), "capped": capped}, repeat)
                    base, count, truncate, capped_time = times["base"], times["count"], times["truncate"], times["capped"]
                    fresh = fresh_best(lambda copy: enc.truncate(copy, limit), text, repeat)
                    print(f"    {name:<12} {kind:<10} 2^{exponent:<4} {limit:>7} {read:>9} {base * 1e3:>10.2f} "
                          f"{count / base:>7.2f} {truncate / base:>9.2f} {capped_time / base:>10.2f} "
                          f"{fresh / base:>7.2f}", flush=True)
    print()


def _tiktoken():
    """tiktoken, offline from the bundled rank files, or None if it cannot load them."""
    import hashlib
    import os
    import shutil
    import tempfile

    ranks = Path(__file__).resolve().parent.parent / "tiktoken_inc" / "ranks"
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-cache-"))
    for path in ranks.glob("*.tiktoken"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{path.name}"
        shutil.copyfile(path, cache / hashlib.sha1(url.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken


# --------------------------------------------------------------------------- (b)

_RSS_CHILD = r"""
import gc, json, resource, sys, time
name, char, mode = sys.argv[1], sys.argv[2], sys.argv[3]
import tiktoken_inc
enc = tiktoken_inc.get_encoding(name)
enc.encode_ordinary("warm up")
text = char * (256 << 20)
gc.collect()
# ru_maxrss can start at the parent's peak (kept across fork + exec) and includes the
# vocabulary build; on Linux, writing 5 to clear_refs resets it to the current RSS.
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if mode == "one-shot":
    tokens = len(enc.encode_ordinary(text))
else:
    tokens = enc.count_tokens(text)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_mib": before / 1024, "peak_mib": peak / 1024, "tokens": tokens, "seconds": seconds,
                  "reset": reset}))
"""


def part_b(encodings: list[str]) -> list[str]:
    """The lines of (b).  Run while this process is small: a child's ru_maxrss starts at the
    parent's RSS (it is kept across fork + exec)."""
    lines = [
        "(b) peak RSS (ru_maxrss) encoding a 256 MiB run, a fresh process each; 'before' = RSS with the",
        "    encoding loaded and the input built (peak reset there); 'extra' = what the call added",
        f"    {'encoding':<12} {'run':<5} {'mode':<34} {'before MiB':>10} {'peak MiB':>9} {'extra MiB':>9} "
        f"{'tokens':>10} {'s':>6}",
    ]
    for name in encodings:
        for char in (" ", "a"):
            for mode, label in (("one-shot", "encode_ordinary (one-shot)"), ("stream", "count_tokens, no limit (stream)")):
                out = subprocess.run([sys.executable, "-c", _RSS_CHILD, name, char, mode], capture_output=True, text=True)
                if out.returncode != 0:
                    lines.append(f"    {name:<12} {char!r:<5} {label:<34} FAILED rc={out.returncode}: "
                                 f"{out.stderr.strip()[-200:]}")
                    continue
                r = json.loads(out.stdout)
                lines.append(
                    f"    {name:<12} {char!r:<5} {label:<34} {r['before_mib']:>10.0f} {r['peak_mib']:>9.0f} "
                    f"{r['peak_mib'] - r['before_mib']:>9.0f} {r['tokens']:>10} {r['seconds']:>6.1f}"
                    + ("" if r["reset"] else "  (peak not reset: includes earlier peaks)")
                )
    return lines + [""]


# --------------------------------------------------------------------------- (c)

_MATRIX_CHILD = r"""
import json, os, sys, time
name, kind, mib, do_encode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
size = mib << 20
import numpy as np
import tiktoken_inc
enc = tiktoken_inc.get_encoding(name)
rng = np.random.default_rng(mib)

def random_unicode(count):
    points = rng.integers(0, 0x110000 - 0x800, size=count, dtype=np.uint32)
    points[points >= 0xD800] += 0x800  # skip the surrogates
    return points.astype("<u4").tobytes().decode("utf-32-le")

if kind.startswith("run "):
    char = kind[5:-1]
    data = char * (size // len(char.encode()))
elif kind == "surrogateescape":
    data = rng.bytes(size).decode("utf-8", "surrogateescape")
elif kind == "random unicode":
    data = random_unicode(size // 4)
elif kind == "NUL":
    data = "\0" * size
elif kind == "invalid utf-8":
    data = rng.bytes(size)
else:
    raise SystemExit(f"unknown input {kind}")

limit = int(os.environ.get("LIMIT", "1000"))
if isinstance(data, bytes):
    apis = [("_encode_bytes", lambda: enc._encode_bytes(data))] if do_encode else []
    apis.append(("count_tokens(bytes)", lambda: enc.count_tokens(data)))
else:
    apis = [
        ("count_tokens", lambda: enc.count_tokens(data)),
        ("count_tokens(limit)", lambda: enc.count_tokens(data, limit=limit)),
        ("truncate", lambda: enc.truncate(data, limit)),
    ]
    if do_encode:
        apis += [
            ("encode", lambda: enc.encode(data)),
            ("encode_ordinary", lambda: enc.encode_ordinary(data)),
            ("encode(max_tokens)", lambda: enc.encode(data, max_tokens=limit)),
        ]

def describe(api, result):
    if api == "truncate":
        tokens, prefix = result
        return f"{len(tokens)} tokens, prefix of the text: {data.startswith(prefix)}"
    if isinstance(result, list):
        return f"{len(result)} tokens"
    return repr(result)

for api, call in apis:
    start = time.perf_counter()
    try:
        detail = "ok: " + describe(api, call())
    except BaseException as error:  # MemoryError included: it is an outcome, not a crash
        detail = f"{type(error).__name__}: {str(error).splitlines()[0][:90] if str(error) else ''}"
    print(json.dumps({"api": api, "detail": detail, "seconds": time.perf_counter() - start}), flush=True)
"""


def part_c(encodings: list[str], max_mib: int, timeout: float) -> None:
    count_sizes = [s for s in SIZES_MIB if s <= min(max_mib, COUNT_CAP_MIB)]
    encode_cap = min(max_mib, ENCODE_CAP_MIB)
    print(f"(c) hostile inputs: sizes {count_sizes} MiB (encode APIs up to {encode_cap} MiB), "
          f"limit / max_tokens / truncate n = {LIMIT}; one process per row group")
    print(f"    {'encoding':<12} {'input':<16} {'MiB':>5} {'api':<20} {'s':>7}  outcome")
    crashes = 0
    for name in encodings:
        for kind in INPUTS:
            for mib in count_sizes:
                do_encode = mib <= encode_cap
                args = [sys.executable, "-c", _MATRIX_CHILD, name, kind, str(mib), "1" if do_encode else "0"]
                try:
                    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
                except subprocess.TimeoutExpired as error:
                    print(f"    {name:<12} {kind:<16} {mib:>5} {'-':<20} {'-':>7}  TIMEOUT after {timeout:.0f} s")
                    stdout = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
                    out = None
                else:
                    stdout = out.stdout
                for line in stdout.splitlines():
                    r = json.loads(line)
                    print(f"    {name:<12} {kind:<16} {mib:>5} {r['api']:<20} {r['seconds']:>7.2f}  {r['detail']}")
                if out is not None and out.returncode != 0:
                    crashes += 1
                    print(f"    {name:<12} {kind:<16} {mib:>5} {'-':<20} {'-':>7}  PROCESS DIED rc={out.returncode}: "
                          f"{out.stderr.strip()[-300:]}")
    print(f"    processes that died: {crashes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--max-mib", type=int, default=64, help="largest hostile input (MiB); up to 1024")
    parser.add_argument("--only", choices=["a", "b", "c", "d", "e"], nargs="+", default=["a", "b", "c", "d", "e"])
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per hostile-input process")
    parser.add_argument("--repeat", type=int, default=3, help="timings per figure of (d) and (e)")
    parser.add_argument("--tiktoken-mib", type=int, default=16, help="largest text tiktoken encodes in (d)")
    args = parser.parse_args()
    memory = part_b(args.encodings) if "b" in args.only else []  # before (a) makes this process big
    if "a" in args.only:
        part_a(args.encodings)
    print("\n".join(memory), end="\n" if memory else "")
    if "d" in args.only:
        part_d(args.encodings, args.repeat, args.tiktoken_mib)
    if "e" in args.only:
        part_e(args.encodings, args.repeat)
    if "c" in args.only:
        part_c(args.encodings, args.max_mib, args.timeout)


if __name__ == "__main__":
    main()
