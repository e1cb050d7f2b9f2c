"""Time and peak memory of `get_encoding(name)`, tiktoken_inc beside tiktoken, in one run.

Each measurement is a fresh process (import + get_encoding + one encode), so nothing is
cached in memory; tiktoken reads its rank files from TIKTOKEN_CACHE_DIR, which this script
fills from the files bundled with tiktoken_inc, so neither side touches the network.
tiktoken_inc is measured cold (its on-disk table cache turned off: the tables are built)
and warm (the tables mapped from the cache that a first run wrote).  The children cache
their bytecode whatever PYTHONDONTWRITEBYTECODE says here, as an installed package has its
.pyc files: otherwise every process would compile the modules again (about 20 ms).

    python pathological/bench_load.py --encodings o200k_base cl100k_base --repeat 5
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
library, name = sys.argv[1], sys.argv[2]
start = time.perf_counter()
module = __import__(library)
encoding = module.get_encoding(name)
encoding.encode_ordinary("warm up")
seconds = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024}))
"""


def offline_tiktoken_cache() -> str:
    """A TIKTOKEN_CACHE_DIR holding the bundled rank files under tiktoken's cache names."""
    import tiktoken_inc

    ranks = Path(tiktoken_inc.__file__).parent / "ranks"
    cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
    for path in ranks.glob("*.tiktoken"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{path.name}"
        shutil.copy(path, Path(cache) / hashlib.sha1(url.encode()).hexdigest())
    return cache


def best_of_rounds(timers: dict, repeat: int, rotate: bool = False) -> tuple[dict, dict]:
    """For each key, `timers[key]()` times one measurement and returns (seconds, result).
    They run round by round, alternating (the order rotating each round with `rotate`), so
    that a slow stretch of a shared machine falls on every side of a ratio alike: (each
    key's least seconds, each key's last result).  The other benchmarks share this."""
    seconds = {key: float("inf") for key in timers}
    results: dict = {}
    order = list(timers)
    for round_index in range(repeat):
        shift = round_index % len(order) if rotate and order else 0
        for key in order[shift:] + order[:shift]:
            took, results[key] = timers[key]()
            seconds[key] = min(seconds[key], took)
    return seconds, results


def loop_timer(call, loops: int):
    """A timer for best_of_rounds: process CPU seconds per call of `loops` calls of call()."""
    def timed() -> tuple[float, None]:
        start = time.process_time()
        for _ in range(loops):
            call()
        return (time.process_time() - start) / loops, None

    return timed


def measure(library: str, name: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, library, name], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


#: The variants measured: label -> (module, TIKTOKEN_INC_CACHE_DIR or None to leave it).
#: "cold" builds the tables (the cache is off); "warm" maps the image a previous run cached.
VARIANTS = {
    "tiktoken": ("tiktoken", None),
    "inc cold": ("tiktoken_inc", ""),
    "inc warm": ("tiktoken_inc", "WARM"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=offline_tiktoken_cache())
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    warm_cache = tempfile.mkdtemp(prefix="tiktoken-inc-cache-")
    print(f"{'encoding':<14} {'variant':<13} {'median s':>9} {'min s':>7} {'peak MiB':>9}")
    for name in args.encodings:
        measure("tiktoken", name, env)  # its bytecode
        measure("tiktoken_inc", name, dict(env, TIKTOKEN_INC_CACHE_DIR=warm_cache))  # fills the cache
        rows: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
            for label, (library, cache) in VARIANTS.items():
                variant_env = env if cache is None else dict(env, TIKTOKEN_INC_CACHE_DIR=warm_cache if cache else "")
                rows.setdefault(label, []).append(measure(library, name, variant_env))
        base = statistics.median(r["seconds"] for r in rows["tiktoken"])
        for label, runs in rows.items():
            seconds = [r["seconds"] for r in runs]
            peak = max(r["peak_mib"] for r in runs)
            ratio = statistics.median(seconds) / base
            print(f"{name:<14} {label:<13} {statistics.median(seconds):>9.3f} {min(seconds):>7.3f} {peak:>9.1f}"
                  f"   x{ratio:.2f} of tiktoken's time")
    shutil.rmtree(warm_cache, ignore_errors=True)


if __name__ == "__main__":
    main()
