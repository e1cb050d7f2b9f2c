"""Workers on one machine: unpickling a custom encoding, and the memory of N workers.

Two measurements, tiktoken_inc beside tiktoken in the same run, each in fresh processes
(import included, bytecode cached as after an install), interleaved round by round:

1. **Unpickling a custom encoding** (what a worker of a `multiprocessing` pool or a Ray
   task does with an `Encoding` it is sent): an `Encoding` made from a copy of
   `--ranks`' ranks (a dict, so not a bundled encoding) with its own name and special
   tokens, pickled once; each child imports the library and `pickle.loads` it, then
   encodes a line.  tiktoken_inc warm: its tables mapped from the on-disk cache (keyed by
   the ranks); cold: the cache off (`TIKTOKEN_INC_CACHE_DIR=''`), the tables built.
2. **Memory of N workers** (`--workers`, default 4): N processes each `get_encoding(name)`
   and encode `--text-mib` MiB of text, then wait; the script sums their proportional set
   size (`Pss` of /proc/<pid>/smaps_rollup: a page shared by k processes counts 1/k in
   each), so the sum is what the N workers take from the machine together.  tiktoken_inc's
   tables are a read-only mapping of one cache file, shared by all the workers.

    python pathological/bench_workers.py --repeat 5
    python pathological/bench_workers.py --ranks cl100k_base --workers 8

Linux only (it reads /proc).  Needs tiktoken; it reads its rank files offline from a
temporary TIKTOKEN_CACHE_DIR filled from tiktoken_inc's bundled ones.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402

_UNPICKLE_CHILD = r"""
import json, pickle, sys, time
library, path = sys.argv[1], sys.argv[2]
with open(path, "rb") as file:
    data = file.read()
start = time.perf_counter()
__import__(library)
imported = time.perf_counter()
encoding = pickle.loads(data)
loaded = time.perf_counter()
encoding.encode_ordinary("a worker's first line of text")
print(json.dumps({"total": time.perf_counter() - start, "loads": loaded - imported}))
"""

_WORKER_CHILD = r"""
import sys
library, name, text_path = sys.argv[1], sys.argv[2], sys.argv[3]
module = __import__(library)
encoding = module.get_encoding(name)
with open(text_path, encoding="utf-8") as file:
    text = file.read()
ids = encoding.encode_ordinary(text)
print(len(ids), flush=True)
sys.stdin.read()  # wait until the parent has measured
"""


def make_pickles(ranks_name: str, directory: str, env: dict[str, str]) -> dict[str, str]:
    """The same custom encoding pickled by each library; returns library -> pickle path."""
    script = r"""
import pickle, sys
library, ranks_name, out = sys.argv[1], sys.argv[2], sys.argv[3]
module = __import__(library)
base = module.get_encoding(ranks_name)
encoding = module.Encoding(
    "custom_" + ranks_name, pat_str=base._pat_str, mergeable_ranks=dict(base._mergeable_ranks),
    special_tokens={"<|endoftext|>": base.max_token_value + 1, "<|pad|>": base.max_token_value + 2},
)
with open(out, "wb") as file:
    pickle.dump(encoding, file)
"""
    paths = {}
    for library in ("tiktoken", "tiktoken_inc"):
        path = os.path.join(directory, f"{library}.pickle")
        subprocess.run([sys.executable, "-c", script, library, ranks_name, path], env=env, check=True)
        paths[library] = path
    return paths


def unpickle(library: str, path: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _UNPICKLE_CHILD, library, path], env=env, check=True, capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as file:
        for line in file:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Pss for {pid}")


def workers_pss(library: str, name: str, count: int, text_path: str, env: dict[str, str]) -> float:
    """The summed Pss (MiB) of `count` workers that have loaded `name` and encoded the text."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER_CHILD, library, name, text_path], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for _ in range(count)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            if not process.stdout.readline().strip():
                raise RuntimeError(f"a {library} worker failed")
        return sum(pss_kib(process.pid) for process in processes) / 1024
    finally:
        for process in processes:
            try:
                process.communicate(input="", timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def sample_text(mib: float) -> str:
    """English-like text: the corpus if it is there, else generated words."""
    corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "english.txt"
    if corpus.exists():
        text = corpus.read_text(encoding="utf-8")
    else:
        words = "the of and to in is was that for it with as his on be at by had are but from".split()
        text = " ".join(words[i * 7 % len(words)] for i in range(200_000))
    size = int(mib * 2**20)
    return (text * (size // max(len(text), 1) + 1))[:size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="o200k_base", help="the bundled encoding whose ranks the custom one copies")
    parser.add_argument("--encoding", default="o200k_base", help="what the workers of the memory test load")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--text-mib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-workers-")
    warm_cache = os.path.join(work, "cache")
    os.mkdir(warm_cache, 0o700)
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=offline_tiktoken_cache(), TIKTOKEN_INC_CACHE_DIR=warm_cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as after an install
    cold_env = dict(env, TIKTOKEN_INC_CACHE_DIR="")
    try:
        pickles = make_pickles(args.ranks, work, env)
        unpickle("tiktoken", pickles["tiktoken"], env)  # bytecode
        unpickle("tiktoken_inc", pickles["tiktoken_inc"], env)  # fills the cache
        time.sleep(1)  # (the cache is written by a thread that ends with the process)
        variants = {
            "tiktoken": ("tiktoken", env),
            "inc warm": ("tiktoken_inc", env),
            "inc cold": ("tiktoken_inc", cold_env),
        }
        rows: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
        for _ in range(args.repeat):
            for label, (library, variant_env) in variants.items():
                rows[label].append(unpickle(library, pickles[library], variant_env))
        print(f"unpickling a custom encoding of {args.ranks}'s ranks, fresh processes, medians of {args.repeat}:")
        print(f"{'variant':<10} {'pickle.loads s':>15} {'whole child s':>14}")
        base = statistics.median(r["loads"] for r in rows["tiktoken"])
        for label, runs in rows.items():
            loads = statistics.median(r["loads"] for r in runs)
            total = statistics.median(r["total"] for r in runs)
            print(f"{label:<10} {loads:>15.3f} {total:>14.3f}   loads x{loads / base:.2f} of tiktoken's")

        text_path = os.path.join(work, "text.txt")
        Path(text_path).write_text(sample_text(args.text_mib), encoding="utf-8")
        workers_pss("tiktoken_inc", args.encoding, 1, text_path, env)  # the image is cached
        pss: dict[str, list[float]] = {"tiktoken": [], "tiktoken_inc": []}
        for _ in range(args.repeat):
            for library in pss:
                pss[library].append(workers_pss(library, args.encoding, args.workers, text_path, env))
        ours, theirs = statistics.median(pss["tiktoken_inc"]), statistics.median(pss["tiktoken"])
        print(f"\n{args.workers} workers, each {args.encoding} and {args.text_mib:g} MiB of text encoded, "
              f"summed Pss, medians of {args.repeat}:")
        print(f"tiktoken {theirs:.1f} MiB, tiktoken_inc {ours:.1f} MiB: x{ours / theirs:.2f} of tiktoken's")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
