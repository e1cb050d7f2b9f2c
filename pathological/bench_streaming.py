"""Streaming encoder and prefix index: cost against one-shot encoding, window size, feed latency.

Two tables:

1. Ratios.  For every encoding, with the regex pre-split and without it (`pretokenize=False`),
   and for every input -- each corpus in ../shared/corpora (or --corpora DIR) and runs of
   spaces, "a", newlines, digits, CJK ("中") and emoji ("🙂") of --run-bytes bytes (2^22 by
   default) -- the text is encoded whole (`enc.encode(text)`) and then:
   - streamed: its UTF-8 fed to `enc.stream_encoder()` in 4 KiB and in 64 KiB feeds (feeds
     cut characters), then `finish()`; the ratio is stream time / encode(whole) time;
   - fed one byte per call for its first --byte-feeds bytes: microseconds per feed (each
     feed is one Python call and one C call);
   - indexed: `enc.prefix_index(text)` time / `enc.encode_ordinary(text)` time.
   Times are the thread's CPU time (other processes' time is left out), best of --repeat
   rounds, the calls of an input alternating within each round.
   With the pre-split, tiktoken's `encode(text)` is timed once beside (MiB/s, or the
   exception it raised; inputs over --tiktoken-mib are skipped), and the speed-up of ours
   over it.  The ids of every stream are compared with encode(whole); a mismatch is printed.
   The targets: each stream ratio at most 1.2, each prefix_index ratio at most 1.5.
2. Feed latency on runs of --mib MiB (default 16): spaces, "a", CJK, fed in 64 KiB chunks,
   and the first --latency-byte-feeds bytes of each fed one byte per call.  Columns: the
   worst single feed, the median feed, their ratio and p99.9 (wall clock), the worst and
   median thread CPU time per feed (where the worst is), the throughput and
   max_pending_bytes (the largest unresolved window).  On a busy machine the worst
   wall-clock feed is a preemption (a few ms, anywhere); the CPU columns show the work.

    python pathological/bench_streaming.py
    python pathological/bench_streaming.py --encodings cl100k_base --run-bytes 1048576 --skip-latency
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import best_of_rounds, offline_tiktoken_cache  # noqa: E402

_DEFAULT_CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"
PATHOLOGICAL_CHUNK = 1 << 16


def best(function, repeat: int, setup=None) -> tuple[float, object]:
    """(best thread CPU seconds, last result) of `repeat` calls, each after setup() (untimed)."""
    seconds, result = float("inf"), None
    for _ in range(repeat):
        result = None
        if setup is not None:
            setup()
        gc.collect()
        start = time.thread_time()
        result = function()
        seconds = min(seconds, time.thread_time() - start)
    return seconds, result


def stream_chunks(enc, chunks: list[bytes]) -> tuple[list[list[int]], int]:
    """The lists of ids that the feeds of `chunks` and finish() returned, and the largest
    number of bytes the encoder held unresolved after a feed.  The chunks are cut before
    the timing (they arrive cut), and the lists are kept as they come, as a consumer that
    forwards them would; joining them into one list (a copy of every id, up to half the
    time of encoding a run) is left out of the timing."""
    encoder = enc.stream_encoder()
    feed = encoder.feed
    outputs = [feed(chunk) for chunk in chunks]
    outputs.append(encoder.finish())
    return outputs, encoder.stats["max_pending_bytes"]


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[start:start + size] for start in range(0, len(data), size)]


def joined(outputs: list[list[int]]) -> list[int]:
    return [token for output in outputs for token in output]


def byte_feeds(enc, data: bytes) -> float:
    """Thread CPU seconds per feed of `data` fed one byte per call (finish included)."""
    encoder = enc.stream_encoder()
    feed = encoder.feed
    pieces = [data[index:index + 1] for index in range(len(data))]
    gc.collect()
    start = time.thread_time()
    for piece in pieces:
        feed(piece)
    encoder.finish()
    return (time.thread_time() - start) / max(1, len(pieces))


def run_inputs(size: int) -> dict[str, str]:
    """Runs of one character, `size` bytes of UTF-8 each (rounded down to whole characters)."""
    runs = {"spaces": " ", "a": "a", "newlines": "\n", "digits": None, "CJK": "中", "emoji": "🙂"}
    texts = {}
    for label, char in runs.items():
        if char is None:  # a run of digits, not one digit: "0123456789" repeated
            texts[label] = ("0123456789" * (size // 10 + 1))[:size]
        else:
            texts[label] = char * (size // len(char.encode("utf-8")))
    return texts


def tiktoken_speed(name: str, text: str, mib: float, limit_mib: float) -> tuple[str, float | None]:
    """tiktoken's encode(text) once: (MiB/s or why there is no figure, seconds or None)."""
    if mib > limit_mib:
        return "skipped", None
    try:
        import tiktoken
    except ImportError:
        return "absent", None
    reference = tiktoken.get_encoding(name)
    gc.collect()
    start = time.thread_time()
    try:
        reference.encode(text)
    except BaseException as error:  # pyo3's PanicException derives from BaseException
        if isinstance(error, KeyboardInterrupt):
            raise
        return type(error).__name__, None
    seconds = time.thread_time() - start
    return f"{mib / seconds:.1f}", seconds


def ratios(encodings: list[str], inputs: dict[str, str], repeat: int, feeds_per_input: int,
           tiktoken_mib: float) -> None:
    import tiktoken_inc
    from tiktoken_inc import prefix

    print(f"Stream encoder and prefix index against one-shot encoding (thread CPU time, best of {repeat}); "
          f"targets: stream <= 1.2x encode(whole), prefix_index <= 1.5x encode_ordinary")
    header = (f"{'encoding':<12} {'mode':<9} {'input':<17} {'MiB':>5} {'encode MiB/s':>12} {'4 KiB':>6} "
              f"{'64 KiB':>6} {'1 B us/feed':>11} {'prefix':>6} {'window B':>8} {'tiktoken MiB/s':>14} "
              f"{'ours/tt':>7}")
    print(header)
    print("-" * len(header))
    worst = {"4 KiB": 0.0, "64 KiB": 0.0, "prefix": 0.0}
    for name in encodings:
        for pretokenize in (True, False):
            enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
            mode = "regex" if pretokenize else "one-piece"
            for label, text in inputs.items():
                data = text.encode("utf-8")
                mib = len(data) / 2**20
                small_chunks, large_chunks = cut(data, 4096), cut(data, 65536)
                # The five calls alternate round by round (bench_load.best_of_rounds);
                # prefix_index keeps the last few indexes: emptied before each call, untimed.
                seconds, results = best_of_rounds(
                    {"whole": lambda: best(lambda: enc.encode(text), 1, setup=enc.clear_cache),
                     "small": lambda: best(lambda: stream_chunks(enc, small_chunks), 1, setup=enc.clear_cache),
                     "large": lambda: best(lambda: stream_chunks(enc, large_chunks), 1, setup=enc.clear_cache),
                     "ordinary": lambda: best(lambda: enc.encode_ordinary(text), 1, setup=enc.clear_cache),
                     "index": lambda: best(lambda: enc.prefix_index(text), 1, setup=prefix._caches.clear)},
                    repeat)
                whole_time, small_time, large_time = seconds["whole"], seconds["small"], seconds["large"]
                ordinary_time, index_time = seconds["ordinary"], seconds["index"]
                want, (small, window), (large, _) = results["whole"], results["small"], results["large"]
                results = None
                per_byte = byte_feeds(enc, utf8_prefix(data, feeds_per_input))
                reference, reference_time = ("", None)
                if pretokenize:
                    reference, reference_time = tiktoken_speed(name, text, mib, tiktoken_mib)
                speedup = f"{reference_time / whole_time:.1f}" if reference_time else ""
                flag = "" if joined(small) == want == joined(large) else "  MISMATCH"
                small = large = None
                row = {"4 KiB": small_time / whole_time, "64 KiB": large_time / whole_time,
                       "prefix": index_time / ordinary_time}
                for key, value in row.items():
                    worst[key] = max(worst[key], value)
                print(f"{name:<12} {mode:<9} {label:<17} {mib:>5.2f} {mib / whole_time:>12.1f} "
                      f"{row['4 KiB']:>6.2f} {row['64 KiB']:>6.2f} {per_byte * 1e6:>11.2f} {row['prefix']:>6.2f} "
                      f"{window:>8} {reference:>14} {speedup:>7}{flag}", flush=True)
    print("worst ratios: " + ", ".join(f"{key} {value:.2f}" for key, value in worst.items()))


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


def latency(encodings: list[str], mib: int, byte_feeds: int) -> None:
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
    parser.add_argument("--run-bytes", type=int, default=1 << 22, help="size of each run in the ratio table")
    parser.add_argument("--byte-feeds", type=int, default=1 << 16,
                        help="bytes of each input fed one at a time in the ratio table")
    parser.add_argument("--tiktoken-mib", type=float, default=4.0,
                        help="largest input tiktoken is timed on (it is slow on long runs)")
    parser.add_argument("--mib", type=int, default=16, help="size of each stream in the latency table")
    parser.add_argument("--latency-byte-feeds", type=int, default=1 << 18,
                        help="bytes fed one at a time in the latency table")
    parser.add_argument("--skip-ratios", action="store_true", help="only the latency table")
    parser.add_argument("--skip-latency", action="store_true", help="only the ratio table")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", offline_tiktoken_cache())  # tiktoken, offline
    if not args.skip_ratios:
        inputs: dict[str, str] = {}
        if args.corpora.is_dir():
            for path in sorted(p for p in args.corpora.glob("*.txt") if p.name != "MANIFEST.txt"):
                inputs[path.name] = path.read_text(encoding="utf-8")
        else:
            print(f"no corpora at {args.corpora} (pass --corpora DIR): runs only", file=sys.stderr)
        inputs.update(run_inputs(args.run_bytes))
        ratios(args.encodings, inputs, args.repeat, args.byte_feeds, args.tiktoken_mib)
    if not args.skip_latency:
        latency(args.encodings, args.mib, args.latency_byte_feeds)


if __name__ == "__main__":
    main()
