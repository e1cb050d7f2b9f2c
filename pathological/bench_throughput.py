"""Throughput of `encode_ordinary`, tiktoken_inc beside tiktoken, on the real corpora.

For every corpus file in ../shared/corpora (or --corpora DIR) and every encoding, both
libraries encode the same text in the same process, alternating, best of --repeat; the
table gives MiB/s and the ratio tiktoken_inc / tiktoken.  Two modes: the whole file in
one call, and per document (the file split on blank lines, one call each).  The ids are
compared too: a mismatch is printed, never hidden.

    python pathological/bench_throughput.py --encodings cl100k_base o200k_base
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402

_DEFAULT_CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"


def best_time(function, argument, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function(argument)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
    parser.add_argument("--corpora", type=Path, default=_DEFAULT_CORPORA)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.corpora.is_dir():
        sys.exit(f"no corpora at {args.corpora}: pass --corpora DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = offline_tiktoken_cache()
    import tiktoken

    import tiktoken_inc

    files = sorted(p for p in args.corpora.glob("*.txt") if p.name != "MANIFEST.txt")
    print(f"{'encoding':<12} {'corpus':<17} {'mode':<9} {'tiktoken MiB/s':>14} {'inc MiB/s':>10} {'ratio':>6}")
    for name in args.encodings:
        reference = tiktoken.get_encoding(name)
        ours = tiktoken_inc.get_encoding(name)
        for path in files:
            text = path.read_text(encoding="utf-8")
            mib = len(text.encode("utf-8")) / 2**20
            documents = [d for d in text.split("\n\n") if d]
            modes = {
                "file": lambda enc, t=text: enc.encode_ordinary(t),
                "document": lambda enc, ds=documents: [enc.encode_ordinary(d) for d in ds],
            }
            for mode, run in modes.items():
                if run(ours) != run(reference):
                    print(f"MISMATCH {name} {path.name} {mode}")
                theirs_s = ours_s = float("inf")
                for _ in range(args.repeat):
                    theirs_s = min(theirs_s, best_time(run, reference, 1))
                    ours_s = min(ours_s, best_time(run, ours, 1))
                print(
                    f"{name:<12} {path.name:<17} {mode:<9} {mib / theirs_s:>14.2f} {mib / ours_s:>10.2f}"
                    f" {theirs_s / ours_s:>6.2f}"
                )


if __name__ == "__main__":
    main()
