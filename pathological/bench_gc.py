"""A per-document loop that keeps its results, with the garbage collector on and off.

bench_peers.py times with the collector off, as timeit does.  Most programs leave it on,
and a loop that keeps what it encodes (`[enc.encode_ordinary(d) for d in docs]`) then pays
for the collections its new lists trigger: each one walks the young lists, item by item.
tiktoken_inc hands out its lists of ids untracked by the collector (a list of ints is in no
cycle), tiktoken's are tracked.  Both libraries take the same documents (each corpus split
on blank lines, documents up to 64 KiB), alternating; each figure is the best of --repeat
passes of process CPU time, and the ids are checked against tiktoken's.

    python pathological/bench_gc.py --encodings o200k_base cl100k_base --corpus english multilingual
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_batch import documents  # noqa: E402 - the same documents as the batch benchmark
from bench_load import offline_tiktoken_cache  # noqa: E402


def best_pass(encode, docs: list[str], repeat: int) -> float:
    """Milliseconds of the fastest pass of `[encode(d) for d in docs]`, results kept until the pass ends."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        kept = [encode(doc) for doc in docs]
        best = min(best, time.process_time() - start)
        del kept
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--corpus", nargs="+", default=["english", "code", "chinese", "multilingual"])
    parser.add_argument("--corpora", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", offline_tiktoken_cache())
    import tiktoken

    import tiktoken_inc

    print("| encoding | corpus | collector | tiktoken ms | tiktoken_inc ms | inc / tiktoken |")
    print("|---|---|---|---:|---:|---:|")
    for name in args.encodings:
        ours, theirs = tiktoken_inc.get_encoding(name), tiktoken.get_encoding(name)
        for corpus in args.corpus:
            docs = documents(Path(args.corpora) / f"{corpus}.txt")
            if [ours.encode_ordinary(d) for d in docs] != [theirs.encode_ordinary(d) for d in docs]:
                raise SystemExit(f"MISMATCH: {name} {corpus}")
            for collector in ("on", "off"):
                if collector == "off":
                    gc.disable()
                try:
                    reference, mine = float("inf"), float("inf")
                    for _ in range(2):  # alternate, so a slow spell hits both
                        reference = min(reference, best_pass(theirs.encode_ordinary, docs, args.repeat))
                        mine = min(mine, best_pass(ours.encode_ordinary, docs, args.repeat))
                finally:
                    gc.enable()
                print(f"| {name} | {corpus} | {collector} | {reference:.1f} | {mine:.1f} | {reference / mine:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
