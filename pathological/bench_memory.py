"""Peak memory of one-shot `encode_ordinary` on long runs of one character, beyond the list.

Each measurement is a fresh process: it loads the encoding, builds a run of `--mib` MiB of
one character (its UTF-8 made beforehand, as CPython caches it in the str), notes its
resident memory, encodes, and reports the peak resident memory beyond that baseline minus
the returned list (its pointer array; the ids are shared int objects), per input byte.
The target: at most 8 bytes per input byte on 2^24 bytes.

    python pathological/bench_memory.py
    python pathological/bench_memory.py --encodings o200k_base --kinds a spaces --mib 64
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

_CHILD = r"""
import gc, json, resource, sys
import tiktoken_inc
name, character, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
encoding = tiktoken_inc.get_encoding(name)
encoding.encode_ordinary("warm up " * 100)
text = character * (size // len(character.encode("utf-8")))
text.encode("utf-8")
gc.collect()

def resident_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")

before = resident_kib()
ids = encoding.encode_ordinary(text)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
extra = peak * 1024 - before * 1024 - sys.getsizeof(ids)
print(json.dumps({"ids": len(ids), "list_mib": sys.getsizeof(ids) / 2**20, "extra_mib": extra / 2**20,
                  "per_byte": extra / size}))
"""

KINDS = {"a": "a", "spaces": " ", "newlines": "\n", "digits": "0", "cjk": "中", "emoji": "😀"}


def measure(name: str, character: str, size: int) -> dict:
    """One fresh process's figures (see _CHILD), run outside the source tree."""
    with tempfile.TemporaryDirectory() as outside:
        done = subprocess.run([sys.executable, "-c", _CHILD, name, character, str(size)], cwd=outside,
                              capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--mib", type=int, default=16, help="MiB of each run (default 16: 2^24 bytes)")
    args = parser.parse_args()
    if sys.platform != "linux":
        sys.exit("bench_memory.py reads /proc/self/status: Linux only")
    size = args.mib << 20
    print(f"{'encoding':<12} {'run':<9} {'ids':>9} {'list MiB':>9} {'peak beyond MiB':>16} {'bytes/byte':>11}")
    worst = 0.0
    for name in args.encodings:
        for kind in args.kinds:
            row = measure(name, KINDS[kind], size)
            worst = max(worst, row["per_byte"])
            print(f"{name:<12} {kind:<9} {row['ids']:>9} {row['list_mib']:>9.1f} {row['extra_mib']:>16.1f} "
                  f"{row['per_byte']:>11.2f}")
    print(f"largest: {worst:.2f} bytes per input byte beyond the list (target: at most 8)")


if __name__ == "__main__":
    main()
