"""Batches on 1..N threads: the list batch and the flat (numpy) batch, tiktoken and the
peers' flat batches beside them; the list batch's serial share; the corpus command.

1. Scaling.  The documents of each corpus (the file split on blank lines, as in
   bench_peers.py) go to `encode_ordinary_batch(docs, num_threads=k)` (lists) and
   `encode_ordinary_batch_to_numpy(docs, num_threads=k)` (flat) for k = 1, 2, ... up to the
   CPUs, tiktoken's `encode_ordinary_batch` beside them, and, where installed, toktok-rs's
   `encode_batch_to_numpy` and splintr-rs's `encode_batch_flat` (both on all cores, their
   own thread pools; what each keeps of the texts it has encoded emptied before each of
   its timed calls, see Peer).  Every figure is MiB/s, the best of --repeat rounds of wall time
   (threads only help in wall time), all callers alternating within each round.  The ids
   are checked against tiktoken's once per corpus.  Ratios: flat/list on one thread; the
   flat batch on the most threads over one thread; the flat batch on all cores over the
   faster peer.  With --together one more row: every corpus's documents in one batch, the
   long ones (over 64 KiB, left out of the corpus rows) kept.  With --fresh every caller
   gets the documents made afresh each round, as
   text just read is (the UTF-8 of a str that is not ASCII not made yet; each library makes
   it as it reads the str), instead of the same strs each round, whose UTF-8 CPython made
   when tiktoken's ids were computed for the check, and keeps in them.
2. The list batch's serial share: the list batch on one thread minus the flat batch on one
   thread is the time spent building lists with the GIL held (the encoding is the same C
   work in both); no number of threads can make the list batch faster than that part, so
   list(1) / lists is its ceiling over one thread.
3. The corpus command (--corpus-command): `write_corpus` (what `tiktoken-inc encode --lines
   --output` runs) over each corpus file given --scale times (several groups, so that its
   stages overlap), against two forms of the flat batch on all threads over the same lines:
   "numpy", the batch alone over str lines already in memory (made afresh each round, so
   that it converts them to UTF-8 as a first call does: a str keeps its UTF-8 once asked);
   and "numpy job", the same job as the command written with the batch, as a user's script
   does it: read the file, decode it, split its lines, the batch, and `tofile` of the ids
   and the offsets.  The command does all of that (and checks the bytes are UTF-8); the
   batch alone does neither the reading nor the writing, so its ratio is the harder one.
   Then the command itself in a fresh process (startup and loading included) over the file
   given once, --scale times and 4 x --scale times, with the process's peak resident memory
   (Linux: VmHWM), which must not grow with the input.

On a machine with other work running the figures move: the script prints the load average
at start and end.

    python pathological/bench_batch.py --encodings cl100k_base o200k_base --repeat 5 --corpus-command
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import offline_tiktoken_cache  # noqa: E402


def documents(path: Path, longest: int | None = 1 << 16) -> list[str]:
    """The file's documents (split on blank lines), those over `longest` bytes left out."""
    text = path.read_text(encoding="utf-8")
    return [doc for doc in text.split("\n\n") if doc and (longest is None or len(doc.encode()) <= longest)]


def corpus_paths(directory: str) -> list[Path]:
    return sorted(p for p in Path(directory).glob("*.txt") if p.name != "MANIFEST.txt")


def scaling_batches(directory: str, together: bool) -> list[tuple[str, list[str]]]:
    """(name, documents) of each corpus; with `together`, then every corpus's documents in one
    batch, none left out for its size (a long one is an item of its own: the tail that the
    order the threads take items in must hide)."""
    batches = [(path.stem, documents(path)) for path in corpus_paths(directory)]
    if together:
        every = [doc for path in corpus_paths(directory) for doc in documents(path, longest=None)]
        batches.append(("all, uncut", every))
    return batches


def seconds_of(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def best_rates(callers: dict, mib: float | dict, repeat: int, prepare: dict | None = None) -> dict:
    """MiB/s of each caller: the best of `repeat` rounds, the callers alternating; `mib` for
    all or by caller; `prepare[key]()`, where given, runs untimed before each of its calls
    and its result is the call's argument."""
    best = {key: float("inf") for key in callers}
    for _ in range(repeat):
        for key, call in callers.items():
            if prepare and key in prepare:
                argument = prepare[key]()
                best[key] = min(best[key], seconds_of(lambda: call(argument)))
            else:
                best[key] = min(best[key], seconds_of(call))
    return {key: (mib[key] if isinstance(mib, dict) else mib) / value for key, value in best.items()}


class Peer:
    """A peer's flat batch (`flat(texts)`), and `reset()`, which empties what the peer keeps
    of the texts it has encoded, untimed before each of its timed calls: a round never finds
    its documents already encoded (as in bench_peers.py).  splintr's Tokenizer keeps an LRU
    cache of chunks (`clear_cache`); toktok's keeps the pieces it has encoded, with no call
    to empty them, so it is made anew.  On this 2-core machine, English, cl100k_base, the
    second call on the same documents took 0.035-0.05 s against 0.056-0.07 s for a new
    Tokenizer (toktok), and 0.034 s against 0.043-0.049 s after clear_cache (splintr)."""

    def __init__(self, make, flat_of, clear=None) -> None:
        self.make, self.flat_of, self.clear = make, flat_of, clear
        self.tokenizer = make()

    def flat(self, texts: list[str]):
        return self.flat_of(self.tokenizer)(texts)

    def reset(self) -> None:
        if self.clear is not None:
            self.clear(self.tokenizer)
        else:
            self.tokenizer = self.make()


def peers(name: str) -> dict[str, Peer]:
    """The peers' flat batches that are installed and know `name` (each on all cores)."""
    found = {}
    try:
        import toktok

        found["toktok"] = Peer(lambda: toktok._Tokenizer(name, ""), lambda tokenizer: tokenizer.encode_batch_to_numpy)
    except Exception:  # not installed, or not this encoding
        pass
    try:
        import splintr

        found["splintr"] = Peer(lambda: splintr.Tokenizer.from_pretrained(name), lambda tokenizer: tokenizer.encode_batch_flat,
                                clear=lambda tokenizer: tokenizer.clear_cache())
    except Exception:
        pass
    return found


def flat_documents(ids, offsets) -> list[list[int]]:
    import numpy as np

    ids = np.frombuffer(ids, dtype=np.uint32) if isinstance(ids, bytes) else ids
    offsets = np.frombuffer(offsets, dtype=np.uint64) if isinstance(offsets, bytes) else offsets
    return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]


def scaling(args: argparse.Namespace, thread_counts: list[int]) -> None:
    import tiktoken

    import tiktoken_inc

    most = thread_counts[-1]
    columns = [f"list {k}" for k in thread_counts] + [f"numpy {k}" for k in thread_counts]
    columns += [f"tiktoken {k}" for k in (thread_counts[0], most) if not args.no_tiktoken]
    made = "documents made afresh each round" if args.fresh else "the same documents each round, UTF-8 made"
    print(f"\n## Scaling (MiB/s, wall time, best of the rounds; {made})\n")
    print(f"| encoding | corpus | MiB | {' | '.join(columns)} | toktok | splintr | numpy/list 1 thr "
          f"| numpy {most}/1 | numpy {most}/best peer | lists (ms) | encode (ms) | list ceiling |")
    print("|---|---|---:|" + "---:|" * (len(columns) + 8))
    for name in args.encodings:
        ours, theirs = tiktoken_inc.get_encoding(name), tiktoken.get_encoding(name)
        their_flat = peers(name)
        for corpus, docs in scaling_batches(args.corpora, args.together):
            mib = sum(len(doc.encode()) for doc in docs) / 2**20
            expected = theirs.encode_ordinary_batch(docs)
            checks = {"list": ours.encode_ordinary_batch(docs, num_threads=most),
                      "numpy": flat_documents(*ours.encode_ordinary_batch_to_numpy(docs, num_threads=most))}
            checks.update({name_: flat_documents(*peer.flat(docs)) for name_, peer in their_flat.items()})
            for label, got in checks.items():
                if got != expected:
                    print(f"MISMATCH {name} {corpus} {label}")
            callers = {}
            for k in thread_counts:
                callers[f"list {k}"] = lambda texts, k=k: ours.encode_ordinary_batch(texts, num_threads=k)
                callers[f"numpy {k}"] = lambda texts, k=k: ours.encode_ordinary_batch_to_numpy(texts, num_threads=k)
            if not args.no_tiktoken:
                for k in (thread_counts[0], most):
                    callers[f"tiktoken {k}"] = lambda texts, k=k: theirs.encode_ordinary_batch(texts, num_threads=k)
            for peer_name, peer in their_flat.items():
                callers[peer_name] = lambda texts, peer=peer: peer.flat(texts)

            def texts_of_round(docs=docs) -> list[str]:
                return [(doc + " ")[:-1] for doc in docs] if args.fresh else docs

            def peer_round(peer: Peer, docs=docs) -> list[str]:
                peer.reset()
                return texts_of_round(docs)

            def our_round(docs=docs) -> list[str]:
                ours.clear_cache()  # its memos of short pieces, as the peers' caches: emptied before each call
                return texts_of_round(docs)

            prepare = {key: our_round if key.startswith(("list", "numpy")) else texts_of_round for key in callers}
            prepare.update({key: (lambda peer=peer: peer_round(peer)) for key, peer in their_flat.items()})
            rate = best_rates(callers, mib, args.repeat, prepare=prepare)
            best_peer = max((rate[peer] for peer in their_flat), default=float("nan"))
            lists_ms = (mib / rate["list 1"] - mib / rate["numpy 1"]) * 1000
            encode_ms = mib / rate["numpy 1"] * 1000
            cells = [f"{rate[c]:.1f}" for c in columns]
            cells += [f"{rate[p]:.1f}" if p in rate else "-" for p in ("toktok", "splintr")]
            cells += [f"{rate['numpy 1'] / rate['list 1']:.2f}", f"{rate[f'numpy {most}'] / rate['numpy 1']:.2f}",
                      f"{rate[f'numpy {most}'] / best_peer:.2f}", f"{lists_ms:.1f}", f"{encode_ms:.1f}",
                      f"{(encode_ms + lists_ms) / lists_ms:.1f}x" if lists_ms > 0 else "- (noise)"]
            print(f"| {name} | {corpus} | {mib:.2f} | {' | '.join(cells)} |", flush=True)


#: Runs the command's main() in a fresh interpreter, then prints the process's peak resident
#: memory (VmHWM: of this program's own address space; a child's ru_maxrss would also count
#: the parent's memory at the fork that started it).
PEAK_WRAPPER = (
    "import sys; from tiktoken_inc.__main__ import main; status = main(sys.argv[1:]); "
    "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')][0]); "
    "sys.exit(status)"
)


def peak_run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of the command line `argv` (after
    `tiktoken-inc`) in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr}")
    return seconds, int(done.stdout.split()[-1]) / 1024


def numpy_job(enc, path: Path, output: str, threads: int) -> None:
    """What the command does, written with the flat batch as a user's script would: the
    file's lines to `output` (uint32 ids) and its .idx (int64 offsets)."""
    import numpy as np

    lines = path.read_bytes().decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    ids, offsets = enc.encode_ordinary_batch_to_numpy(lines, num_threads=threads)
    ids.astype("<u4", copy=False).tofile(output)
    offsets.astype("<i8", copy=False).tofile(os.path.splitext(output)[0] + ".idx")


def corpus_command(args: argparse.Namespace, threads: int) -> None:
    import tiktoken_inc
    from tiktoken_inc.corpus import write_corpus

    print("\n## Corpus command (`encode --lines --output`), against the numpy batch of the same lines\n")
    print("numpy: the batch alone on the lines in memory; numpy job: reading, decoding, splitting, the batch "
          "and writing the ids and offsets, as the command does (see the module's docstring)\n")
    scales = (1, args.scale, 4 * args.scale)
    scale_columns = " | ".join(f"x{s}: s / peak MiB" for s in scales)
    print(f"| encoding | corpus | MiB | numpy {threads} thr (MiB/s) | numpy job (MiB/s) "
          f"| write_corpus x{args.scale} (MiB/s) | command/numpy | command/numpy job | process {scale_columns} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(scales))
    with tempfile.TemporaryDirectory() as scratch:
        output = os.path.join(scratch, "out.bin")
        for name in args.encodings:
            enc = tiktoken_inc.get_encoding(name)
            for path in corpus_paths(args.corpora):
                data = path.read_bytes()
                mib = len(data) / 2**20

                def fresh_lines(data=data) -> list[str]:
                    lines = data.decode("utf-8").split("\n")
                    if lines[-1] == "":
                        lines.pop()
                    return lines

                # The command over the file --scale times: several groups, so that reading, encoding
                # and writing overlap as they do on a real corpus (one group would run them in turn).
                callers = {
                    "numpy": lambda lines: enc.encode_ordinary_batch_to_numpy(lines, num_threads=threads),
                    "job": lambda: numpy_job(enc, path, output, threads),
                    "command": lambda: write_corpus(
                        enc, [str(path)] * args.scale, output, lines=True, num_threads=threads, progress=False,
                    ),
                }
                rate = best_rates(callers, {"numpy": mib, "job": mib, "command": mib * args.scale}, args.repeat,
                                  prepare={"numpy": fresh_lines})
                runs = []
                for scale in scales:
                    argv = ["encode", "-e", name, "--lines", "-o", output]
                    runs.append(peak_run(argv + [str(path)] * scale))
                process = " | ".join(f"{seconds:.2f} s / {peak:.0f}" for seconds, peak in runs)
                print(f"| {name} | {path.stem} | {mib:.2f} | {rate['numpy']:.1f} | {rate['job']:.1f} "
                      f"| {rate['command']:.1f} | {rate['command'] / rate['numpy']:.2f} "
                      f"| {rate['command'] / rate['job']:.2f} | {process} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--corpora", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", help="thread counts (default 1, 2, 4, ... up to the CPUs)")
    parser.add_argument("--no-tiktoken", action="store_true", help="leave tiktoken out (it takes most of the time)")
    parser.add_argument("--corpus-command", action="store_true", help="also time the corpus command")
    parser.add_argument("--together", action="store_true",
                        help="one more scaling row: every corpus's documents in one batch, long ones kept")
    parser.add_argument("--fresh", action="store_true",
                        help="scaling: documents made afresh each round (their UTF-8 not made yet)")
    parser.add_argument("--scale", type=int, default=8,
                        help="the corpus command's larger inputs: the file this many times, and 4 times that")
    parser.add_argument("--only-corpus-command", action="store_true")
    args = parser.parse_args()

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", offline_tiktoken_cache())
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    thread_counts = args.threads or sorted({1, cpus, *(2**i for i in range(1, 8) if 2**i < cpus)})
    print(f"load average at start: {os.getloadavg()}; cpus: {cpus}")
    if not args.only_corpus_command:
        scaling(args, thread_counts)
    if args.corpus_command or args.only_corpus_command:
        corpus_command(args, thread_counts[-1])
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
