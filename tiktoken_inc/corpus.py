"""Tokenizing a corpus into one flat binary file of ids: the engine of `tiktoken-inc encode
--output`.

The ids of every document go one after another to `OUT.bin` (little-endian uint16 or
uint32, as nanoGPT's prepare.py writes them), and the int64 offsets of the documents to
`OUT.idx` (documents + 1 values, from 0): document i is `ids[offsets[i]:offsets[i + 1]]`.
A document is a file (directories are walked recursively, in sorted order), or with
`lines` each line of a file ('\\n' left out); `eot` ends every document with the
encoding's `<|endoftext|>` id.

```
>>> import numpy as np, tiktoken_inc
>>> enc = tiktoken_inc.get_encoding("gpt2")
>>> stats = write_corpus(enc, ["docs/"], "train.bin", id_format="u16", eot=True)
>>> ids = np.fromfile("train.bin", dtype="<u2"); offsets = np.fromfile("train.idx", dtype="<i8")
>>> ids[offsets[0]:offsets[1]].tolist() == enc.encode_ordinary(first_file_text) + [enc.eot_token]
True
```

Three stages overlap, so that the encoding threads never wait on the disk or on each
other: a reader thread (with a few helpers for small files) reads the input into groups of
about GROUP_BYTES (a large file with `lines` in blocks read at their offsets, each cut
after its last newline), ENCODERS threads each encode a group at a time in one flat C
batch on all threads (without the GIL, as the bytes they were given: the threads check
they are UTF-8), and the calling thread appends the ids and offsets of each group to the
output in the input's order.  Two groups are encoded at once because a batch's start and
end run on one thread (cutting its lines, summing its offsets): meanwhile the other
group's threads keep every core encoding.  A group's offsets are encoded from 0 and moved
to their place when it is written.  At most WINDOW_GROUPS groups exist at once (read,
being encoded, or done and waiting for an earlier one), so memory is bounded by a few
groups (and the largest document, which is read whole), whatever the corpus size.
Outputs are written to temporary files in the output's directory and renamed into place
at the end: a stopped or failed run leaves no partial output.
"""
from __future__ import annotations

import os
import queue
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator, NamedTuple, Sequence

from tiktoken_inc._native import add_to_offsets
from tiktoken_inc.core import Encoding, NotUTF8Error

#: Bytes of input encoded in one C call: large enough that a call's fixed costs (starting
#: its threads, waiting for its last run of documents) are well under 1%; small enough that
#: the groups at once (WINDOW_GROUPS) hold little memory.
GROUP_BYTES = 2 << 20
#: Groups encoded at once, each on all threads (see the module's docstring).
ENCODERS = 2
#: Groups that exist at once, at most: being encoded, read ahead, or waiting to be written
#: (peak memory, English lines, cl100k_base: ~105 MiB whatever the input size; with twice
#: as many groups of twice the size, 125-160 MiB, growing with the input).
WINDOW_GROUPS = ENCODERS + 2
#: With `lines`, a file is read in blocks of this size, each cut after its last newline.
BLOCK_BYTES = 1 << 20
#: Threads that open and read small files while the previous ones are encoded.
READERS = 4
#: Files read ahead of the one being grouped, at most (their bytes count towards GROUP_BYTES).
READ_AHEAD_FILES = 256

#: The id formats: (bytes per id, the largest id, Python's array typecode).
ID_FORMATS = {"u16": (2, 0xFFFF, "H"), "u32": (4, 0xFFFFFFFF, "I")}


class CorpusError(Exception):
    """A problem with the input or the output, said in one line (the CLI prints it)."""


class Source(NamedTuple):
    """Where a text of a group comes from: its file ("-" for standard input) and the
    position of its first byte in that file."""

    path: str
    start: int


@dataclass
class CorpusStats:
    """What write_corpus wrote."""

    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    seconds: float = 0.0
    paths: tuple[str, str] = ("", "")


def output_paths(output: str) -> tuple[str, str]:
    """The ids file and the offsets file of `--output OUTPUT`: OUTPUT itself, and OUTPUT
    with its suffix replaced by `.idx` (added if it has none).

    ```
    >>> output_paths("data/train.bin")
    ('data/train.bin', 'data/train.idx')
    ```
    """
    root, extension = os.path.splitext(output)
    index = (root if extension else output) + ".idx"
    if os.path.abspath(index) == os.path.abspath(output):
        raise CorpusError(f"{output}: the output must not end in .idx (the offsets go there)")
    return output, index


def check_format(encoding: Encoding, id_format: str, eot: bool) -> int:
    """The bytes per id of `id_format`; CorpusError if the encoding's ids may not fit (or it
    has no end-of-text token and `eot` is asked for)."""
    if id_format not in ID_FORMATS:
        raise CorpusError(f"unknown format {id_format!r}; choose one of: {', '.join(ID_FORMATS)}")
    if eot and "<|endoftext|>" not in encoding._special_tokens:
        raise CorpusError(f"{encoding.name} has no <|endoftext|> token for --eot")
    id_bytes, largest, _ = ID_FORMATS[id_format]
    if encoding.max_token_value > largest:
        raise CorpusError(
            f"{encoding.name} has ids up to {encoding.max_token_value}, which do not fit {id_format} "
            f"(at most {largest}); use --format u32"
        )
    return id_bytes


def _walk(path: str, skip: frozenset[str]) -> Iterator[str]:
    """The files under directory `path`, recursively, in the order of their sorted paths
    (each directory's entries by name, a subdirectory's files where its name falls; one
    directory listed at a time; links to directories are not followed); `skip` holds real
    paths to leave out (the outputs)."""
    try:
        with os.scandir(path) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        raise CorpusError(f"{path}: cannot list ({error.strerror})") from None
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path, skip)
        elif os.path.realpath(entry.path) not in skip:
            yield entry.path


def _input_files(inputs: Sequence[str], skip: frozenset[str]) -> Iterator[str]:
    """Every input file in order: a FILE itself, a DIR's files (see _walk), "-" as is."""
    for path in inputs:
        if path != "-" and os.path.isdir(path):
            yield from _walk(path, skip)
        else:
            yield path


def _open_descriptor(path: str) -> int:
    """A file descriptor reading `path`, or CorpusError saying why not."""
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except OSError as error:
        raise CorpusError(f"{path}: cannot read ({error.strerror})") from None


def _read_file(path: str) -> bytes:
    """The bytes of a file (with few Python calls: small files are many)."""
    descriptor = _open_descriptor(path)
    try:
        size = os.fstat(descriptor).st_size
        parts = [os.read(descriptor, max(size, 1) + 1)]  # one read for a regular file
        while parts[-1]:
            parts.append(os.read(descriptor, BLOCK_BYTES))
        return b"".join(parts)
    except OSError as error:
        raise CorpusError(f"{path}: cannot read ({error.strerror})") from None
    finally:
        os.close(descriptor)


def _file_line_blocks(path: str) -> Iterator[tuple[int, bytes]]:
    """(start, block) for the whole file in blocks that end after a newline (but the last),
    each about BLOCK_BYTES or one line if longer: each block is read at its offset, so that
    its bytes are copied once (a line cut off at a block's end is read again with the next)."""
    descriptor = _open_descriptor(path)
    try:
        start, want = 0, BLOCK_BYTES
        while True:
            try:
                data = os.pread(descriptor, want, start)
            except OSError as error:
                raise CorpusError(f"{path}: cannot read ({error.strerror})") from None
            if not data:
                return
            cut = len(data) if len(data) < want else data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than the block: read more of it
                want *= 2
                continue
            yield start, data if cut == len(data) else data[:cut]
            start, want = start + cut, BLOCK_BYTES
    finally:
        os.close(descriptor)


def _line_blocks(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(start, block) for the whole stream in blocks that end after a newline (but the last),
    each about BLOCK_BYTES or one line if longer."""
    start, carry = 0, b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if not chunk:
            if carry:
                yield start, carry
            return
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        yield start, data[:cut]
        start, carry = start + cut, data[cut:]


def _texts(inputs: Sequence[str], lines: bool, stdin: BinaryIO, skip: frozenset[str]) -> Iterator[tuple[Source, bytes]]:
    """Every text to encode, in order, with where it comes from: a whole file, or (lines) the
    blocks of a large file.  Small files are read by READERS threads ahead of time."""
    pending: list[tuple[str, Future | None]] = []
    with ThreadPoolExecutor(READERS, thread_name_prefix="tiktoken-inc-read") as readers:
        files = _input_files(inputs, skip)
        while True:
            while len(pending) < READ_AHEAD_FILES:
                path = next(files, None)
                if path is None:
                    break
                small = path != "-" and (not lines or _size(path) <= BLOCK_BYTES)
                pending.append((path, readers.submit(_read_file, path) if small else None))
            if not pending:
                return
            path, future = pending.pop(0)
            if future is not None:
                yield Source(path, 0), future.result()
            elif path == "-":
                if lines:
                    for start, block in _line_blocks(stdin):
                        yield Source("-", start), block
                else:
                    yield Source("-", 0), stdin.read()
            elif hasattr(os, "pread"):
                for start, block in _file_line_blocks(path):
                    yield Source(path, start), block
            else:
                descriptor = _open_descriptor(path)
                with open(descriptor, "rb") as stream:
                    for start, block in _line_blocks(stream):
                        yield Source(path, start), block


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # read now: the reader says what is wrong


class _Group(NamedTuple):
    sources: list[Source]
    texts: list[bytes]
    size: int


def _groups(texts: Iterator[tuple[Source, bytes]]) -> Iterator[_Group]:
    """The texts in groups of about GROUP_BYTES (a larger text is a group of its own)."""
    sources: list[Source] = []
    group: list[bytes] = []
    size = 0
    for source, text in texts:
        sources.append(source)
        group.append(text)
        size += len(text)
        if size >= GROUP_BYTES:
            yield _Group(sources, group, size)
            sources, group, size = [], [], 0
    if group:
        yield _Group(sources, group, size)


_END = object()  # the last item of a queue


class _Stage(threading.Thread):
    """A thread that runs `work(stage)`; if that raises, it keeps the exception for the
    calling thread, with the group the work was at (`stage.position`, which the work
    updates), and sets `stop`, so that the other stages give up."""

    def __init__(self, name: str, work: Callable[["_Stage"], None], stop: threading.Event):
        super().__init__(name=name, daemon=True)
        self._work = work
        self._stop_event = stop
        self.position = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._work(self)
        except BaseException as error:  # re-raised by the calling thread
            self.error = error
            self._stop_event.set()


def _acquire(slots: threading.Semaphore, stop: threading.Event) -> bool:
    """Takes one of `slots`: True, or False once `stop` is set."""
    while not stop.is_set():
        if slots.acquire(timeout=0.1):
            return True
    return False


def _put(channel: queue.Queue, item: object, stop: threading.Event) -> None:
    """Puts `item`, giving up when `stop` is set (the other side is gone)."""
    while not stop.is_set():
        try:
            channel.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _get(channel: queue.Queue, stop: threading.Event) -> object:
    """The next item, or _END once `stop` is set."""
    while not stop.is_set():
        try:
            return channel.get(timeout=0.1)
        except queue.Empty:
            continue
    return _END


def _little_endian(buffer: Any, typecode: str) -> Any:
    """`buffer` of native `typecode` values as little-endian bytes (a copy on big-endian hosts only)."""
    if sys.byteorder == "little":
        return buffer
    from array import array

    values = array(typecode)
    values.frombytes(bytes(buffer))
    values.byteswap()
    return values


def _progress(total: int | None) -> Any:
    """A tqdm bar on a terminal (bytes, with documents and tokens per second), or None: not a
    terminal, or tqdm is not installed (pip install 'tiktoken_inc[progress]')."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, dynamic_ncols=True,
                desc="encoding")


def write_corpus(
    encoding: Encoding,
    inputs: Sequence[str],
    output: str,
    *,
    id_format: str = "u32",
    lines: bool = False,
    eot: bool = False,
    allow_special: bool = False,
    num_threads: int | None = None,
    stdin: BinaryIO | None = None,
    progress: bool | None = None,
) -> CorpusStats:
    """Encodes `inputs` (files, directories, "-" for standard input) into `output` and its
    `.idx` (see the module's docstring); returns what was written.  CorpusError (nothing
    written) for an input that cannot be read or is not UTF-8, ids that do not fit
    `id_format`, or an output that cannot be written.  Special-token text is ordinary text
    unless `allow_special`.  `num_threads`: default all CPUs this process may use.
    `progress`: a bar on a terminal (None: when stderr is one and tqdm is installed).
    """
    id_bytes = check_format(encoding, id_format, eot)
    ids_path, index_path = output_paths(output)
    for path in inputs:
        if path != "-" and not os.path.exists(path):
            raise CorpusError(f"{path}: no such file or directory")
    if num_threads is None:
        num_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    stdin = stdin if stdin is not None else sys.stdin.buffer
    allowed: Any = "all" if allow_special else frozenset()
    eot_id = encoding.eot_token if eot else None
    typecode = ID_FORMATS[id_format][2]

    directory = os.path.dirname(os.path.abspath(ids_path))
    temporaries: list[str] = []
    try:
        for final in (ids_path, index_path):
            descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(final))
            os.close(descriptor)
            temporaries.append(temporary)
    except OSError as error:
        raise CorpusError(f"{ids_path}: cannot write ({error.strerror})") from None
    skip = frozenset(os.path.realpath(path) for path in (ids_path, index_path, *temporaries))

    total = None
    if all(path != "-" and os.path.isfile(path) for path in inputs):
        total = sum(_size(path) for path in inputs)
    bar = _progress(total) if progress is not False else None
    stats = CorpusStats(paths=(ids_path, index_path))
    stop = threading.Event()
    window = threading.Semaphore(WINDOW_GROUPS)  # a slot per group that exists
    to_encode: queue.Queue = queue.Queue()  # (position, group); bounded by the window
    encoded: queue.Queue = queue.Queue()  # (position, ids, offsets, size) in any order

    def read(stage: _Stage) -> None:
        for group in _groups(_texts(inputs, lines, stdin, skip)):  # stage.position: the group being read
            if not _acquire(window, stop):
                return
            _put(to_encode, (stage.position, group), stop)
            stage.position += 1
        for _ in range(ENCODERS):
            _put(to_encode, _END, stop)

    def encode(stage: _Stage) -> None:
        while True:
            item = _get(to_encode, stop)
            if item is _END:
                _put(encoded, _END, stop)
                return
            position, group = item  # type: ignore[misc]
            stage.position = position
            try:
                ids, offsets = encoding._encode_flat(
                    group.texts, num_threads=num_threads, allowed_special=allowed, disallowed_special=(),
                    lines=lines, eot=eot_id, id_bytes=id_bytes, accept_bytes=True,
                )
            except NotUTF8Error as error:
                source = group.sources[error.index]
                name = "standard input" if source.path == "-" else source.path
                at = source.start + error.offset
                bad = group.texts[error.index][error.offset]
                raise CorpusError(f"{name}: not UTF-8 text (byte {at} is {bad:#04x})") from None
            _put(encoded, (position, ids, offsets, group.size), stop)

    reader = _Stage("tiktoken-inc-reader", read, stop)
    encoders = [_Stage(f"tiktoken-inc-encoder-{k}", encode, stop) for k in range(ENCODERS)]
    stages = [reader, *encoders]
    finished = False
    start = time.perf_counter()
    try:
        for stage in stages:
            stage.start()
        with open(temporaries[0], "wb") as ids_file, open(temporaries[1], "wb") as index_file:
            index_file.write(_little_endian(memoryview(bytes(8)), "q"))  # offsets[0] = 0
            done: dict[int, tuple[Any, Any, int]] = {}  # encoded, waiting for an earlier group
            ended = written = 0
            while ended < ENCODERS:
                item = _get(encoded, stop)
                if stop.is_set():
                    break
                if item is _END:
                    ended += 1
                    continue
                position, *result = item  # type: ignore[misc]
                done[position] = tuple(result)  # type: ignore[assignment]
                while written in done:
                    ids, offsets, size = done.pop(written)
                    written += 1
                    add_to_offsets(offsets, stats.tokens)
                    ids_file.write(_little_endian(ids, typecode))
                    index_file.write(_little_endian(memoryview(offsets)[8:], "q"))
                    window.release()
                    stats.documents += len(offsets) // 8 - 1
                    stats.tokens += len(ids) // id_bytes
                    stats.bytes += size
                    if bar is not None:
                        seconds = max(time.perf_counter() - start, 1e-9)
                        bar.set_postfix_str(
                            f"{stats.documents / seconds:,.0f} docs/s, {stats.tokens / seconds:,.0f} tokens/s",
                            refresh=False,
                        )
                        bar.update(size)
        for stage in stages:
            stage.join()
        failed = [stage for stage in stages if stage.error is not None]
        if failed:  # the first group's problem, in the input's order
            raise min(failed, key=lambda stage: stage.position).error  # type: ignore[misc]
        for temporary, final in zip(temporaries, (ids_path, index_path)):
            os.replace(temporary, final)
        temporaries.clear()
        finished = True
    except OSError as error:
        raise CorpusError(f"{error.filename or ids_path}: cannot write ({error.strerror})") from None
    finally:
        stop.set()
        for stage in stages:
            if stage.is_alive():  # after an interruption, a batch under way is not waited for long
                stage.join(None if finished else 1.0)
        if bar is not None:
            bar.close()
        for temporary in temporaries:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    stats.seconds = time.perf_counter() - start
    return stats
