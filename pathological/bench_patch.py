"""Code that imports tiktoken, unchanged, with and without `tiktoken_inc.patch()`, in one run.

The workload is what a library does with tiktoken: for each document of a corpus it asks
`tiktoken.encoding_for_model(model)` for the encoding (as ttok and text splitters do on every
call) and encodes the document, keeping the ids.  Each mode runs in a fresh process; tiktoken
reads its rank files from a TIKTOKEN_CACHE_DIR filled from the files bundled with
tiktoken_inc, so nothing touches the network.  Reported: seconds of process CPU time per run
(best of --repeat) and the ratio, per corpus.  The ids of both modes are checked equal.

    python pathological/bench_patch.py --model gpt-4o --repeat 3
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"

_CHILD = r"""
import hashlib, json, sys, time
mode, model, path = sys.argv[1:4]
import tiktoken
if mode == "patched":
    import tiktoken_inc
    tiktoken_inc.patch()
documents = [d for d in open(path, encoding="utf-8").read().split("\n\n") if d]
tiktoken.encoding_for_model(model).encode("warm up")
start = time.process_time()
kept = [tiktoken.encoding_for_model(model).encode(document, disallowed_special=()) for document in documents]
seconds = time.process_time() - start
digest = hashlib.sha256(repr(kept).encode()).hexdigest()
print(json.dumps({"seconds": seconds, "documents": len(documents), "bytes": sum(len(d.encode()) for d in documents), "digest": digest}))
"""


def run(mode: str, model: str, path: Path, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, model, str(path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpora", nargs="*", default=["english", "multilingual", "code", "chinese"])
    args = parser.parse_args()
    if not CORPORA.is_dir():
        sys.exit(f"no corpora at {CORPORA}: this benchmark needs ../shared/corpora beside the repository")
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=offline_tiktoken_cache())
    env.pop("TIKTOKEN_INC_PATCH", None)
    print(f"model {args.model}; CPU seconds per run, best of {args.repeat}")
    print(f"{'corpus':14s} {'documents':>9s} {'MiB':>6s} {'tiktoken':>9s} {'patched':>9s} {'speed-up':>8s}")
    for corpus in args.corpora:
        path = CORPORA / f"{corpus}.txt"
        best = {}
        for mode in ("plain", "patched"):
            results = [run(mode, args.model, path, env) for _ in range(args.repeat)]
            assert len({r["digest"] for r in results}) == 1
            best[mode] = min(results, key=lambda r: r["seconds"])
        assert best["plain"]["digest"] == best["patched"]["digest"], f"{corpus}: the ids differ"
        plain, patched = best["plain"], best["patched"]
        print(f"{corpus:14s} {plain['documents']:9d} {plain['bytes'] / 2**20:6.1f} {plain['seconds']:9.3f} "
              f"{patched['seconds']:9.3f} {plain['seconds'] / patched['seconds']:7.2f}x")


if __name__ == "__main__":
    main()
