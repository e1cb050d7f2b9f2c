"""encode_ordinary_batch on 1 and 2 threads, tiktoken_inc beside tiktoken, in one run.

The documents of each corpus (the file split on blank lines, as in bench_peers.py) go to
`encode_ordinary_batch(docs, num_threads=n)` for n = 1 and 2; both libraries take the same
list, alternating, and each figure is the best of --repeat rounds of wall time (threads
only help in wall time).  The table gives MiB/s, the speed-up of 2 threads over 1 for each
library, and tiktoken_inc / tiktoken at each thread count.  The ids are checked against
tiktoken's once per corpus.  On a machine with other work running the 2-thread figures
are meaningless: the script prints the load average at start and end.

    python pathological/bench_batch.py --encodings cl100k_base o200k_base --repeat 5
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402


def documents(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [doc for doc in text.split("\n\n") if doc and len(doc.encode()) <= 1 << 16]


def best_seconds(encode, docs: list[str], threads: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        encode(docs, num_threads=threads)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--corpora", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", offline_tiktoken_cache())
    import tiktoken

    import tiktoken_inc

    print(f"load average at start: {os.getloadavg()}; cpus: {os.cpu_count()}")
    print("| encoding | corpus | MiB | tiktoken 1 thr | tiktoken 2 thr | tiktoken 2/1 "
          "| inc 1 thr | inc 2 thr | inc 2/1 | inc/tiktoken 1 thr | inc/tiktoken 2 thr |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.encodings:
        ours, theirs = tiktoken_inc.get_encoding(name), tiktoken.get_encoding(name)
        for path in sorted(p for p in Path(args.corpora).glob("*.txt") if p.name != "MANIFEST.txt"):
            docs = documents(path)
            mib = sum(len(doc.encode()) for doc in docs) / 2**20
            if ours.encode_ordinary_batch(docs, num_threads=2) != theirs.encode_ordinary_batch(docs):
                print(f"MISMATCH {name} {path.stem}")
            seconds = {}
            for _ in range(args.repeat):  # alternate libraries and thread counts
                for label, enc in (("tiktoken", theirs), ("inc", ours)):
                    for threads in (1, 2):
                        got = best_seconds(enc.encode_ordinary_batch, docs, threads, 1)
                        key = (label, threads)
                        seconds[key] = min(seconds.get(key, float("inf")), got)
            rate = {key: mib / value for key, value in seconds.items()}
            print(
                f"| {name} | {path.stem} | {mib:.2f} | {rate['tiktoken', 1]:.1f} | {rate['tiktoken', 2]:.1f} "
                f"| {rate['tiktoken', 2] / rate['tiktoken', 1]:.2f} | {rate['inc', 1]:.1f} | {rate['inc', 2]:.1f} "
                f"| {rate['inc', 2] / rate['inc', 1]:.2f} | {rate['inc', 1] / rate['tiktoken', 1]:.2f} "
                f"| {rate['inc', 2] / rate['tiktoken', 2]:.2f} |"
            )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
