"""Streaming encoder: overhead against one-shot encoding, window size, and feed latency.

Two tables:

1. Real text.  For every corpus in ../shared/corpora (or --corpora DIR) and every encoding
   (with the regex pre-split, and without it: `pretokenize=False`), the whole file is encoded
   once in one call (`encode_ordinary`), and streamed: its UTF-8 fed to
   `enc.stream_encoder(disallowed_special=())` in 4 KiB chunks, then `finish()`.  Best of
   --repeat.  Columns: one-shot MiB/s, streamed MiB/s, their ratio (stream time / one-shot
   time), the same ratio for the bare C stream (`NativeStream`, no special-token scan), and
   the largest unresolved window (`max_pending_bytes`).  The ids are compared; a mismatch
   is printed.
2. Pathological streams of --mib MiB (default 16): spaces, "a", CJK ("中", so 64 KiB chunks
   cut characters), fed in 64 KiB chunks, and the first --byte-feeds bytes of each fed one
   byte per call.  Columns: the worst single feed, the median feed, their ratio and p99.9
   (wall clock), the worst and median thread CPU time per feed (where the worst is), the
   throughput and max_pending_bytes.  On a busy machine the worst wall-clock feed is a
   preemption (a few ms, anywhere); the CPU columns show the work itself.

    python pathological/bench_streaming.py
    python pathological/bench_streaming.py --encodings cl100k_base --mib 4 --byte-feeds 65536
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

_DEFAULT_CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"
CHUNK = 4096
PATHOLOGICAL_CHUNK = 1 << 16


def best(function, repeat: int) -> tuple[float, object]:
    """(best seconds, last result) of `repeat` calls."""
    seconds, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = function()
        seconds = min(seconds, time.perf_counter() - start)
    return seconds, result


def stream_chunks(enc, data: bytes, chunk: int) -> tuple[list[int], dict]:
    encoder = enc.stream_encoder(disallowed_special=())
    ids: list[int] = []
    for start in range(0, len(data), chunk):
        ids += encoder.feed(data[start:start + chunk])
    ids += encoder.finish()
    return ids, encoder.stats


def native_chunks(enc, data: bytes, chunk: int) -> list[int]:
    from tiktoken_inc._native import NativeStream

    core = enc._core_bpe
    stream = NativeStream(core._vocab, core._pattern if core.pretokenize else 0)
    ids: list[int] = []
    for start in range(0, len(data), chunk):
        ids += stream.feed(data[start:start + chunk])
    return ids + stream.finish()


def real_text(encodings: list[str], corpora: Path, repeat: int) -> None:
    import tiktoken_inc

    files = sorted(p for p in corpora.glob("*.txt") if p.name != "MANIFEST.txt")
    print(f"Real text, fed in {CHUNK // 1024} KiB chunks (best of {repeat})")
    header = (f"{'encoding':<12} {'mode':<9} {'corpus':<17} {'one-shot MiB/s':>14} {'stream MiB/s':>12} "
              f"{'ratio':>6} {'C ratio':>7} {'max window B':>12}")
    print(header)
    print("-" * len(header))
    for name in encodings:
        for pretokenize in (True, False):
            enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
            mode = "regex" if pretokenize else "one-piece"
            for path in files:
                text = path.read_text(encoding="utf-8")
                data = text.encode("utf-8")
                mib = len(data) / 2**20
                one_shot_time, want = best(lambda: enc.encode_ordinary(text), repeat)
                stream_time, (ids, stats) = best(lambda: stream_chunks(enc, data, CHUNK), repeat)
                native_time, native_ids = best(lambda: native_chunks(enc, data, CHUNK), repeat)
                flag = "" if ids == want == native_ids else "  MISMATCH"
                print(f"{name:<12} {mode:<9} {path.name:<17} {mib / one_shot_time:>14.1f} {mib / stream_time:>12.1f} "
                      f"{stream_time / one_shot_time:>6.2f} {native_time / one_shot_time:>7.2f} "
                      f"{stats['max_pending_bytes']:>12}{flag}", flush=True)


def feed_latencies(enc, data: bytes, chunk: int) -> tuple[list[float], list[float], dict, float]:
    """Wall seconds and thread CPU seconds of every feed (and of finish), the stats, and the
    total wall seconds.  CPU time leaves out the time the thread was not running (preempted
    by other processes), which dominates the worst wall-clock feed on a busy machine."""
    encoder = enc.stream_encoder(disallowed_special=())
    feeds = (len(data) + chunk - 1) // chunk
    latencies, cpu = [0.0] * (feeds + 1), [0.0] * (feeds + 1)  # no list growth while timing
    clock, cpu_clock = time.perf_counter, time.thread_time
    gc.collect()
    gc.disable()
    try:
        total_start = clock()
        for index in range(feeds):
            piece = data[index * chunk:(index + 1) * chunk]
            cpu_begin, begin = cpu_clock(), clock()
            encoder.feed(piece)
            end, cpu_end = clock(), cpu_clock()
            latencies[index], cpu[index] = end - begin, cpu_end - cpu_begin
        cpu_begin, begin = cpu_clock(), clock()
        encoder.finish()
        end, cpu_end = clock(), cpu_clock()
        latencies[feeds], cpu[feeds] = end - begin, cpu_end - cpu_begin
        total = clock() - total_start
    finally:
        gc.enable()
    return latencies, cpu, encoder.stats, total


def utf8_prefix(data: bytes, size: int) -> bytes:
    """The longest prefix of `data` of at most `size` bytes that ends on a character boundary."""
    while 0 < size < len(data) and data[size] & 0xC0 == 0x80:
        size -= 1
    return data[:size]


def pathological(encodings: list[str], mib: int, byte_feeds: int) -> None:
    import tiktoken_inc

    size = mib << 20
    inputs = {
        "spaces": b" " * size,
        "a": b"a" * size,
        "CJK": ("中" * (size // 3 + 1)).encode()[:size - size % 3],
    }
    print()
    print(f"Pathological streams: {mib} MiB in {PATHOLOGICAL_CHUNK // 1024} KiB feeds, "
          f"and the first {byte_feeds} bytes in 1-byte feeds")
    print("wall: elapsed time per feed; cpu: the thread's CPU time per feed (no preemption); "
          "window: max_pending_bytes")
    header = (f"{'encoding':<12} {'mode':<9} {'input':<7} {'feed':>7} {'feeds':>8} {'worst ms':>9} "
              f"{'median ms':>9} {'worst/med':>9} {'p99.9 ms':>9} {'cpu wst':>8} {'cpu med':>8} {'cpu wst@':>8} "
              f"{'MiB/s':>6} {'window':>7}")
    print(header)
    print("-" * len(header))
    for name in encodings:
        for pretokenize in (True, False):
            enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
            mode = "regex" if pretokenize else "one-piece"
            for label, data in inputs.items():
                for chunk, prefix in ((PATHOLOGICAL_CHUNK, data), (1, utf8_prefix(data, byte_feeds))):
                    latencies, cpu, stats, total = feed_latencies(enc, prefix, chunk)
                    ordered = sorted(latencies)
                    worst, median = ordered[-1], statistics.median(ordered)
                    worst_cpu, median_cpu = max(cpu), statistics.median(cpu)
                    worst_at = cpu.index(worst_cpu)
                    where = "finish" if worst_at == len(cpu) - 1 else f"#{worst_at}"
                    p999 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))]
                    feed = f"{chunk // 1024} KiB" if chunk >= 1024 else f"{chunk} B"
                    print(f"{name:<12} {mode:<9} {label:<7} {feed:>7} {len(latencies):>8} {worst * 1e3:>9.3f} "
                          f"{median * 1e3:>9.4f} {worst / median:>9.1f} {p999 * 1e3:>9.4f} "
                          f"{worst_cpu * 1e3:>8.3f} {median_cpu * 1e3:>8.4f} {where:>8} "
                          f"{len(prefix) / 2**20 / total:>6.1f} {stats['max_pending_bytes']:>7}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["r50k_base", "cl100k_base", "o200k_base"])
    parser.add_argument("--corpora", type=Path, default=_DEFAULT_CORPORA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mib", type=int, default=16, help="size of each pathological stream")
    parser.add_argument("--byte-feeds", type=int, default=1 << 18, help="bytes fed one at a time")
    parser.add_argument("--skip-real", action="store_true", help="only the pathological table")
    args = parser.parse_args()
    if not args.skip_real:
        if not args.corpora.is_dir():
            sys.exit(f"no corpora at {args.corpora}: pass --corpora DIR (or --skip-real)")
        real_text(args.encodings, args.corpora, args.repeat)
    pathological(args.encodings, args.mib, args.byte_feeds)


if __name__ == "__main__":
    main()
