"""The thin Python face of the C core (csrc/): builds a vocabulary, encodes, decodes.

Everything here converts arguments, calls one C function and turns its status into a
Python exception.  The C calls release the GIL, so threads encode in parallel.

```
>>> vocab = NativeVocab({b"a": 0, b"b": 1, b"ab": 2}, {})
>>> vocab.encode_pieces([b"abab"])
[2, 2]
```
"""
from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import sys
import threading
from array import array
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

try:
    from tiktoken_inc import _tki
    from tiktoken_inc._tki import ffi, lib
except ImportError as error:  # pragma: no cover - depends on how the package was installed
    import os as _os

    raise ImportError(
        "tiktoken_inc's C core (tiktoken_inc._tki) is not built here: "
        f"{_os.path.dirname(_os.path.abspath(__file__))} holds the sources only.  "
        "If you are inside the source tree, run Python from another directory (the installed "
        "package is then imported), or build in place with `pip install -e .`."
    ) from error

#: The compiled C core's file (the on-disk cache keys its images by it).
CORE_LIBRARY_PATH: str = _tki.__file__

# The functions of _tki that take Python objects (tiktoken_inc/_tki_python.c): encoders
# that read a str's UTF-8 in place and fill lists from shared int objects.  CPython only;
# elsewhere (or if installing them fails) the cffi paths below do the same work.
_python_functions: Any = None
if sys.implementation.name == "cpython" and lib.tki_python_install() == 0:
    _python_functions = _tki


def held_method(
    function: Callable[..., Any], attribute: str, failure: str | None = None, *, declines: bool = False,
    limit_keyword: str | None = None,
) -> Callable[..., Any]:
    """A method standing for `function` whose call `(self, text)` is
    `getattr(self, attribute)(text)` made from C, with no Python frame: `function` itself
    where the C functions are not built.  Any other call goes to `function`, which it
    stands for everywhere else (signature, docstring, binding to instances).

    With `declines` (or a `failure`), the held attribute may be None and the held call may
    return None: either way the call is then `function`'s; the attribute may also be a
    tuple `(held, watched, size)`: `held` while the set `watched` has `size` items, else
    `function`.  With `failure` (the name of a
    method of the instance), an exception of the held call other than RuntimeError is
    first handed to `getattr(self, failure)(error)`, then raised.  With `limit_keyword`
    (which implies `declines`), the call `(self, text, <limit_keyword>=limit)` is held too:
    `getattr(self, attribute)(text, limit)`, whose int answer over an int `limit` is
    answered None (a count over its limit).

    ```
    >>> Encoding.encode_ordinary = held_method(Encoding.encode_ordinary, "_ordinary_encoder")
    >>> Encoding.encode = held_method(Encoding.encode, "_held_encode", declines=True)
    >>> StreamEncoder.feed = held_method(StreamEncoder.feed, "_fast_feed", "_note_failure")
    >>> Encoding.count_tokens = held_method(Encoding.count_tokens, "_held_count", limit_keyword="limit")
    ```
    """
    if _python_functions is None:
        return function
    if limit_keyword is not None:
        return _python_functions.held_method(function, attribute, failure, limit_keyword)
    if failure is None and not declines:
        return _python_functions.held_method(function, attribute)
    return _python_functions.held_method(function, attribute, failure)


def _id_list(ids: Any, count: int) -> list[int]:
    """The list of the `count` uint32 ids of the C array `ids`."""
    if _python_functions is not None and count > 16:
        return _python_functions.id_list(int(ffi.cast("uintptr_t", ids)), count)
    return ffi.unpack(ids, count)


def utf8_replacing_surrogates(text: str) -> bytes:
    """The UTF-8 of `text` with its surrogates paired up and the lone ones replaced by
    U+FFFD, as tiktoken makes it (through UTF-16); in one pass in C, where CPython's codecs
    call their error handler once per lone surrogate.

    ```
    >>> utf8_replacing_surrogates("a\\ud800b\\ud83d\\ude00")
    b'a\\xef\\xbf\\xbdb\\xf0\\x9f\\x98\\x80'
    ```
    """
    if _python_functions is not None:
        return _python_functions.utf8_replacing_surrogates(text)
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def add_to_offsets(buffer: Any, delta: int) -> None:
    """Adds `delta` (>= 0) to each native int64 of the writable `buffer`, in place: the
    offsets of a part of a flat batch, encoded from 0, moved to where the part's ids land.

    ```
    >>> offsets = bytearray(array("q", [0, 3, 5]))
    >>> add_to_offsets(offsets, 10); array("q", offsets).tolist()
    [10, 13, 15]
    ```
    """
    if _python_functions is not None:
        _python_functions.add_to_offsets(buffer, delta)
        return
    values = memoryview(buffer).cast("B").cast("q")
    for index in range(len(values)):
        values[index] += delta


def str_utf8(text: str) -> bytes:
    """The UTF-8 of a str, lone surrogates replaced as tiktoken does: a copy of the UTF-8
    that CPython keeps with the str once a call has read it (every encode does), so that a
    text already encoded is not converted again.

    ```
    >>> str_utf8("h\\u00e9\\ud800")
    b'h\\xc3\\xa9\\xef\\xbf\\xbd'
    ```
    """
    if _python_functions is not None:
        return _python_functions.utf8_bytes(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return utf8_replacing_surrogates(text)


def _compiled_address(compiled: "CompiledPattern | None") -> int:
    """The address of a CompiledPattern's C pattern, 0 for None."""
    return int(ffi.cast("uintptr_t", compiled._pattern)) if compiled is not None else 0


def _matcher_address(matcher: "SpecialMatcher | None") -> int:
    """The address of a SpecialMatcher's C matcher, 0 for None."""
    return int(ffi.cast("uintptr_t", matcher._matcher)) if matcher is not None else 0


def _pattern_arguments(pattern: int, compiled: "CompiledPattern | None") -> tuple[int, tuple[int, ...]]:
    """The pattern argument of the lean module functions and what goes after their usual
    arguments: (pattern, ()) for a built-in pattern (or 0), (0, (its address,)) for a
    compiled one, which then splits."""
    if compiled is None:
        return pattern, ()
    return 0, (int(ffi.cast("uintptr_t", compiled._pattern)),)


_lengths_lock = threading.Lock()
#: token_lengths() is an array indexed by id while the ids span at most about twice the
#: tokens (csrc/token_table.c keeps ranks as ids by the same rule), else a dict.
_DENSE_IDS_PER_TOKEN = 2
_DENSE_IDS_SLACK = 4096

_METHODS = {
    "auto": 0,
    "linear": lib.TKI_METHOD_LINEAR,
    "heap": lib.TKI_METHOD_HEAP,
}


# Output buffers are written by C before they are read: no need to zero them first.
_new_uninitialized = ffi.new_allocator(should_clear_after_alloc=False)


class _Spare(threading.local):
    """This thread's spare output array of _SCRATCH_KEEP ids, with two result cells, or
    None while a call has it."""

    def __init__(self) -> None:
        self.scratch: _Scratch | None = None


class _Scratch:
    """An output array and the result cells of one call."""

    __slots__ = ("capacity", "out", "cells", "index")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.out = _new_uninitialized("uint32_t[]", max(1, capacity))
        self.cells = ffi.new("size_t[2]")
        self.index = ffi.new("uint32_t[1]")  # SpecialMatcher.find's string index


_spare = _Spare()
_SCRATCH_KEEP = 1 << 16  # ids; larger arrays are allocated per call and not kept
_BATCH_KEEP = 1 << 20  # ids kept per thread by a batch encoder (batch chunks are smaller)


def _take_scratch(size: int) -> _Scratch:
    """Scratch with room for `size` ids, for one call: this thread's spare, taken, so that
    a call that runs inside this one (a signal handler or a finalizer that encodes on the
    same thread) gets scratch of its own and cannot change this call's ids; or a new one.
    Give it back with _give_back once its ids are read."""
    if size <= _SCRATCH_KEEP:
        scratch = _spare.scratch
        if scratch is not None:
            _spare.scratch = None
            return scratch
        return _Scratch(_SCRATCH_KEEP)
    return _Scratch(size)


def _give_back(scratch: _Scratch) -> None:
    """Keeps `scratch` as this thread's spare (if it is of the kept size)."""
    if scratch.capacity == _SCRATCH_KEEP:
        _spare.scratch = scratch


def _encode_job(handle: Any, pattern: int, capacity: int) -> tuple[Any, Any]:
    """A tki_encode_job for `handle` and `pattern` with room for `capacity` ids, and its
    output array (keep both: the job only points at the array)."""
    job = ffi.new("tki_encode_job *")
    out = _new_uninitialized("uint32_t[]", max(1, capacity))
    job.vocab, job.pattern, job.flags = handle, pattern, 0
    job.out, job.out_capacity = out, capacity
    return job, out


def status_message(status: int) -> str:
    """The C core's sentence for a status."""
    return ffi.string(lib.tki_status_message(status)).decode()


_message = status_message


def raise_for_status(status: int, what: str) -> None:
    """Raises the Python exception for a C status: MemoryError, else ValueError, "what: why"."""
    if status == lib.TKI_ERR_NOMEM:
        raise MemoryError(f"{what}: {_message(status)}")
    raise ValueError(f"{what}: {_message(status)}")


def _check_rank(token: bytes, rank: object) -> None:
    if not isinstance(rank, int) or not 0 <= rank < 2**32 - 1:
        raise ValueError(f"rank {rank!r} of token {token!r} is not an integer in [0, 2**32 - 1)")


def _special_list(special_tokens: dict[str, int]) -> list[tuple[bytes, int]]:
    """The special tokens as (UTF-8, rank) (the empty one too: it decodes to nothing)."""
    return [(text.encode("utf-8"), rank) for text, rank in special_tokens.items()]


def _decode_only(
    specials: list[tuple[bytes, int]], empty_token_rank: "int | None", is_mergeable_id: Callable[[int], bool]
) -> list[tuple[bytes, int]]:
    """The tokens the C tables keep apart from the mergeable ones (they only decode): the
    special tokens, but for one on a mergeable token's id (that id decodes as the mergeable
    token, as in tiktoken), and an empty mergeable token (never merged into)."""
    if empty_token_rank is not None:
        specials = specials + [(b"", empty_token_rank)]
    return [(text, rank) for text, rank in specials if not is_mergeable_id(rank)]


def _pack(items: Sequence[bytes]) -> tuple[bytes, list[int]]:
    offsets = [0]
    total = 0
    for item in items:
        total += len(item)
        offsets.append(total)
    return b"".join(items), offsets


#: What the C rank-file reader's statuses mean (RankFileProblem.status).
_RANK_FILE_STATUSES = {
    lib.TKI_ERR_MALFORMED_LINE: "malformed line",
    lib.TKI_ERR_BAD_BASE64: "bad base64",
    lib.TKI_ERR_RANK_RANGE: "rank out of range",
    lib.TKI_ERR_NO_TOKENS: "no tokens",
    lib.TKI_ERR_DUPLICATE_BYTES: "duplicate token",
    lib.TKI_ERR_DUPLICATE_RANK: "duplicate rank",
}


class RankFileProblem:
    """Where the C reader found the first problem of a rank file (load.rank_file_error says
    it in words)."""

    __slots__ = ("status", "line", "line_start", "line_end", "earlier_line")

    def __init__(self, status: str, line: int, line_start: int, line_end: int, earlier_line: int):
        #: "malformed line", "bad base64", "rank out of range", "no tokens",
        #: "duplicate token" or "duplicate rank".
        self.status = status
        self.line = line  # 1-based; 0: the file as a whole
        self.line_start = line_start
        self.line_end = line_end
        self.earlier_line = earlier_line


def _rank_file_problem(status: int, error: object) -> RankFileProblem:
    return RankFileProblem(
        _RANK_FILE_STATUSES[status], error.line, error.line_start, error.line_end, error.earlier_line  # type: ignore[attr-defined]
    )


def parse_rank_file(data: bytes) -> "tuple[list[bytes], list[int], RankFileProblem | None]":
    """The tokens and ranks of rank-file content, in file order, read and checked in C;
    or ([], [], the first problem).  MemoryError if C runs out of memory.

    ```
    >>> parse_rank_file(b"YQ== 0\\nYg== 1\\n")[:2]
    ([b'a', b'b'], [0, 1])
    ```
    """
    parsed = ffi.new("tki_rank_list *")
    error = ffi.new("tki_rank_file_error *")
    status = lib.tki_rank_file_parse(ffi.from_buffer(data), len(data), parsed, error)
    if status == lib.TKI_ERR_NOMEM:
        raise_for_status(status, "cannot read the rank file")
    if status != lib.TKI_OK:
        return [], [], _rank_file_problem(status, error)
    try:
        count = parsed.count
        pool = ffi.buffer(parsed.bytes, parsed.offsets[count])[:]
        offsets = ffi.unpack(parsed.offsets, count + 1)
        ranks = ffi.unpack(parsed.ranks, count)
    finally:
        lib.tki_rank_list_free(parsed)
    tokens = [pool[start:end] for start, end in zip(offsets, offsets[1:])]
    return tokens, ranks, None


#: The C pre-splitters of tiktoken's patterns (TKI_PATTERN_*).
PATTERN_R50K: int = lib.TKI_PATTERN_R50K
PATTERN_CL100K: int = lib.TKI_PATTERN_CL100K
PATTERN_O200K: int = lib.TKI_PATTERN_O200K

#: tiktoken's pre-split patterns that the C core implements, by pattern string.
PATTERN_IDS: dict[str, int] = {}


def register_pattern(pat_str: str, pattern: int) -> None:
    """Declares that `pat_str` is split by the C pre-tokenizer `pattern` (a TKI_PATTERN_*)."""
    PATTERN_IDS[pat_str] = pattern


def pretokenize_ends(pattern: int, data: bytes) -> "array[int]":
    """The byte ends of the pieces of UTF-8 `data` under a built-in pattern, as array('Q').

    ```
    >>> list(pretokenize_ends(lib.TKI_PATTERN_CL100K, b"Hello world!!"))
    [5, 11, 13]
    ```
    """
    if not data:
        return array("Q")
    ends = _new_uninitialized("size_t[]", len(data))
    count = ffi.new("size_t *")
    status = lib.tki_pretokenize(pattern, ffi.from_buffer(data), len(data), ends, len(data), count)
    if status != lib.TKI_OK:
        raise_for_status(status, "pre-splitting failed")
    if ffi.sizeof("size_t") == array("Q").itemsize:
        packed = array("Q")
        packed.frombytes(ffi.buffer(ends, count[0] * ffi.sizeof("size_t")))  # one copy, no ints
        return packed
    return array("Q", ffi.unpack(ends, count[0]))


def pretokenize(pattern: int, data: bytes) -> list[bytes]:
    """The pieces of UTF-8 `data` under a built-in pattern, as `regex.findall` would give them.

    ```
    >>> pretokenize(lib.TKI_PATTERN_CL100K, b"Hello world!!")
    [b'Hello', b' world', b'!!']
    ```
    """
    if not data:
        return []
    ends = ffi.new("size_t[]", len(data))
    count = ffi.new("size_t *")
    status = lib.tki_pretokenize(pattern, ffi.from_buffer(data), len(data), ends, len(data), count)
    if status != lib.TKI_OK:
        raise_for_status(status, "pre-tokenizing failed")
    pieces, start = [], 0
    for end in ffi.unpack(ends, count[0]):
        pieces.append(data[start:end])
        start = end
    return pieces


class CompiledPattern:
    """A custom pre-split pattern compiled for C (tiktoken_inc/_pattern.py makes the program,
    csrc/pattern.c checks it and splits with it).  Immutable and thread-safe.

    ```
    >>> from tiktoken_inc._pattern import compile_pattern
    >>> CompiledPattern(compile_pattern(r"\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+|\\s+")).pretokenize(b"ab12 c!")
    [b'ab', b'1', b'2', b' ', b'c', b'!']
    ```
    """

    def __init__(self, program: bytes):
        out = ffi.new("tki_pattern **")
        status = lib.tki_pattern_load(ffi.from_buffer(program), len(program), out)
        if status != lib.TKI_OK:
            raise_for_status(status, "cannot load the compiled pattern")
        self._pattern = ffi.gc(out[0], lib.tki_pattern_free)
        #: The built-in pattern whose splitter one-shot encoding borrows (`use_builtin`), or 0.
        self.builtin = 0

    def use_builtin(self, pattern: int) -> None:
        """Lets one-shot encoding split with the built-in pattern `pattern`'s C splitter, and
        with this one only the piece that splitter ends at the end of the text: for a pattern
        that is the built-in one without its end-anchored alternatives (`_pattern.same_split`
        of this program and `_pattern.compile_body` of the built-in pattern).  Call it before
        the pattern is shared."""
        status = lib.tki_pattern_use_builtin(self._pattern, pattern)
        if status != lib.TKI_OK:
            raise_for_status(status, "not a built-in pattern")
        self.builtin = pattern

    def pretokenize(self, data: bytes) -> list[bytes]:
        """The pieces of UTF-8 `data`."""
        ends = self.piece_ends(data)
        return [data[start:end] for start, end in zip([0] + ends, ends)]

    def piece_ends(self, data: bytes) -> list[int]:
        """The byte end of each piece of UTF-8 `data`."""
        if not data:
            return []
        ends = _new_uninitialized("size_t[]", len(data))
        count = ffi.new("size_t *")
        status = lib.tki_pattern_pretokenize(self._pattern, ffi.from_buffer(data), len(data), ends, len(data), count)
        if status != lib.TKI_OK:
            raise_for_status(status, "pre-tokenizing failed")
        return ffi.unpack(ends, count[0])

    def representatives(self) -> list[int]:
        """One code point of each class of characters the pattern tells apart."""
        capacity = lib.tki_pattern_atom_count(self._pattern)
        out = ffi.new("uint32_t[]", max(capacity, 1))
        count = ffi.new("size_t *")
        status = lib.tki_pattern_representatives(self._pattern, out, capacity, count)
        if status != lib.TKI_OK:
            raise_for_status(status, "cannot list the pattern's classes")
        return ffi.unpack(out, count[0])

    def encode(
        self, vocab: "NativeVocab", data: bytes, *, specials: "SpecialMatcher | None" = None, method: str = "auto"
    ) -> tuple[list[int], int]:
        """encode of UTF-8 `data` with this pattern and `vocab`, the strings of `specials` as
        their ids, in one C call: the ids, and how many of them the last piece gave (0 after
        a special token)."""
        if not data:
            return [], 0
        scratch = _take_scratch(len(data))
        try:
            status = lib.tki_pattern_encode_with_specials(
                vocab._vocab, self._pattern, specials._matcher if specials is not None else ffi.NULL,
                ffi.from_buffer(data), len(data), _METHODS[method],
                scratch.out, scratch.capacity, scratch.cells, scratch.cells + 1,
            )
            if status != lib.TKI_OK:
                raise_for_status(status, "encoding failed")
            return _id_list(scratch.out, scratch.cells[0]), scratch.cells[1]
        finally:
            _give_back(scratch)


class NativeVocab:
    """A vocabulary built into the C core's tables (immutable, thread-safe).

    `mergeable_ranks` maps token bytes to ranks (ids); `special_tokens` maps special
    token text to ids (they only decode).  Raises ValueError for a vocabulary the core
    cannot use (duplicate ranks, a missing single byte, a token that is too long).
    """

    def __init__(self, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int]):
        tokens = list(mergeable_ranks.items())
        specials = _special_list(special_tokens)
        for token, rank in tokens + specials:
            _check_rank(token, rank)
        if b"" in mergeable_ranks:
            tokens = [(token, rank) for token, rank in tokens if token]
        mergeable_ids = {rank for _, rank in tokens}
        specials = _decode_only(specials, mergeable_ranks.get(b""), mergeable_ids.__contains__)
        data, offsets = _pack([t for t, _ in tokens])
        sdata, soffsets = _pack([t for t, _ in specials])
        out = ffi.new("tki_vocab **")
        error_index = ffi.new("uint32_t *")
        status = lib.tki_vocab_build(
            ffi.from_buffer(data), ffi.new("uint64_t[]", offsets),
            ffi.new("uint32_t[]", [r for _, r in tokens]), len(tokens),
            ffi.from_buffer(sdata), ffi.new("uint64_t[]", soffsets),
            ffi.new("uint32_t[]", [r for _, r in specials]), len(specials),
            out, error_index,
        )
        if status != lib.TKI_OK:
            index = error_index[0]
            if status == lib.TKI_ERR_MISSING_BYTE:
                where = f"byte {bytes([index])!r} has no rank"
            elif index < len(tokens):
                where = f"token {tokens[index][0]!r} (rank {tokens[index][1]})"
            elif index - len(tokens) < len(specials):
                where = f"special token {specials[index - len(tokens)][0]!r}"
            else:
                where = "vocabulary"
            raise_for_status(status, f"cannot build the vocabulary: {where}")
        self._vocab = ffi.gc(out[0], lib.tki_vocab_free)
        self._load_info()

    @classmethod
    def from_rank_file(
        cls, data: bytes, special_tokens: dict[str, int]
    ) -> "NativeVocab | RankFileProblem | None":
        """The tables for the tokens of rank-file content `data` (read in C: no Python
        object per token) and `special_tokens`; the file's first problem; or None for a
        problem of the vocabulary or a rank too large for C (the caller builds from a dict
        then, which says what is wrong).  MemoryError if C runs out of memory.
        """
        specials = _special_list(special_tokens)
        if not all(isinstance(rank, int) and 0 <= rank < 2**32 - 1 for _, rank in specials):
            return None
        sdata, soffsets = _pack([t for t, _ in specials])
        out = ffi.new("tki_vocab **")
        error = ffi.new("tki_rank_file_error *")
        error_index = ffi.new("uint32_t *")
        status = lib.tki_vocab_build_from_rank_file(
            ffi.from_buffer(data), len(data),
            ffi.from_buffer(sdata), ffi.new("uint64_t[]", soffsets),
            ffi.new("uint32_t[]", [r for _, r in specials]), len(specials),
            out, error, error_index,
        )
        if status == lib.TKI_OK:
            self = cls.__new__(cls)
            self._vocab = ffi.gc(out[0], lib.tki_vocab_free)
            self._load_info()
            return self
        if status == lib.TKI_ERR_NOMEM:
            raise_for_status(status, "cannot build the vocabulary")
        file_problem = status in (lib.TKI_ERR_MALFORMED_LINE, lib.TKI_ERR_BAD_BASE64, lib.TKI_ERR_NO_TOKENS) or (
            status in (lib.TKI_ERR_DUPLICATE_BYTES, lib.TKI_ERR_DUPLICATE_RANK) and error.line != 0
        )
        return _rank_file_problem(status, error) if file_problem else None

    def forget_pieces(self) -> None:
        """Frees the memos of short pieces that encoding keeps from call to call (those no
        call holds now); the next calls start without, as the first did."""
        lib.tki_vocab_forget_pieces(self._vocab)

    def _load_info(self) -> None:
        info = ffi.new("tki_vocab_info *")
        lib.tki_vocab_get_info(self._vocab, info)
        self.info: dict[str, int] = {name: getattr(info, name) for name in dir(info)}
        #: True when the incremental algorithm encodes this vocabulary (improper ones are
        #: properized); False when it cannot (a single byte missing, a token over 4096
        #: bytes, an automaton of 2**24 blocks or more) and every piece uses the heap BPE.
        self.incremental: bool = bool(info.incremental)

    @classmethod
    def from_image(cls, image: mmap.mmap) -> "NativeVocab | None":
        """The tables of an image written by `write_image`, mapped read-only by the caller
        (`_cache.py` opens the file), or None if it is damaged, crafted or from another
        build (the caller then rebuilds): every table is checked before it is used.

        The tables are used in place, so processes that map the same file share its
        memory; the vocabulary keeps the mapping alive.
        """
        buffer = ffi.from_buffer(image)
        out = ffi.new("tki_vocab **")
        # The checks read every page; they are dropped from this process as they go (they
        # stay in the page cache), so only the pages encoding uses count towards its memory.
        if lib.tki_vocab_read_mapped_image(buffer, len(image), out) != lib.TKI_OK:
            del buffer
            image.close()
            return None
        self = cls.__new__(cls)
        self._image = (image, buffer)  # the tables live there: keep it as long as the vocabulary
        self._vocab = ffi.gc(out[0], lib.tki_vocab_free)
        self._load_info()
        return self

    def set_specials(self, special_tokens: dict[str, int], empty_token_rank: "int | None" = None) -> None:
        """Gives tables read from an image (which holds no special tokens, so that
        vocabularies that differ only in them share one) their special tokens, and the rank
        of an empty mergeable token if the ranks have one; before the tables are shared
        with other threads.  Raises what `NativeVocab(ranks, special_tokens)` raises for a
        wrong special token.
        """
        specials = _special_list(special_tokens)
        for token, rank in specials:
            _check_rank(token, rank)
        length = ffi.new("size_t *")
        data = ffi.new("uint8_t **")
        specials = _decode_only(
            specials, empty_token_rank, lambda rank: lib.tki_token_bytes(self._vocab, rank, data, length) == lib.TKI_OK
        )
        if not specials:
            return
        sdata, soffsets = _pack([t for t, _ in specials])
        error_index = ffi.new("uint32_t *")
        status = lib.tki_vocab_set_specials(
            self._vocab, ffi.from_buffer(sdata), ffi.new("uint64_t[]", soffsets),
            ffi.new("uint32_t[]", [r for _, r in specials]), len(specials), error_index,
        )
        if status != lib.TKI_OK:
            index = error_index[0]
            where = f"special token {specials[index][0]!r}" if index < len(specials) else "vocabulary"
            raise_for_status(status, f"cannot build the vocabulary: {where}")
        self._load_info()

    def write_image(self, path: str) -> None:
        """Writes the tables to `path` atomically: a new temporary file (mode 0600) in the
        same directory, which must exist, renamed over `path`; so concurrent writers and
        readers never see a partial image, and a file that processes have mapped is never
        truncated or written in place (that would kill them with SIGBUS).

        Each table is written from where it lives (no copy of the whole image is made).
        """
        import tempfile

        size = ffi.new("uint64_t *")
        lib.tki_vocab_image_header(self._vocab, ffi.NULL, 0, size)
        header = ffi.new("uint8_t[]", size[0])
        status = lib.tki_vocab_image_header(self._vocab, header, size[0], size)
        if status != lib.TKI_OK:
            raise_for_status(status, "cannot write the table image")
        directory = os.path.dirname(os.path.abspath(path))
        descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".tkivocab")
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(ffi.buffer(header, size[0]))
                data = ffi.new("uint8_t **")
                padding = ffi.new("uint64_t *")
                index = 0
                while lib.tki_vocab_image_piece(self._vocab, index, data, size, padding) == lib.TKI_OK:
                    if size[0]:
                        file.write(ffi.buffer(data[0], size[0]))
                    file.write(bytes(padding[0]))
                    index += 1
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    # ------------------------------------------------------------------ encode
    def encode_joined(
        self, data: bytes, piece_ends: Sequence[int], *, shortcut: bool = True, method: str = "auto"
    ) -> list[int]:
        """Encodes pieces laid end to end in `data`; `piece_ends` are cumulative byte ends."""
        if not data:
            return []
        out = _new_uninitialized("uint32_t[]", len(data))
        count = ffi.new("size_t *")
        flags = _METHODS[method] | (lib.TKI_WHOLE_PIECE_SHORTCUT if shortcut else 0)
        status = lib.tki_encode_pieces(
            self._vocab, ffi.from_buffer(data), len(data),
            ffi.new("size_t[]", piece_ends), len(piece_ends), flags,
            out, len(data), count,
        )
        if status != lib.TKI_OK:
            raise_for_status(status, "encoding failed")
        return _id_list(out, count[0])

    def encode_pieces(self, pieces: Iterable[bytes], *, shortcut: bool = True, method: str = "auto") -> list[int]:
        """Encodes each piece on its own (tiktoken's per-piece BPE) and concatenates the ids."""
        items = [p for p in pieces if p]
        data, offsets = _pack(items)
        return self.encode_joined(data, offsets[1:], shortcut=shortcut, method=method)

    def bpe(self, piece: bytes, *, method: str = "auto") -> list[int]:
        """Plain BPE of one piece, without the whole-piece shortcut."""
        return self.encode_joined(piece, [len(piece)], shortcut=False, method=method) if piece else []

    def encode_text(self, pattern: int, data: bytes, *, method: str = "auto") -> tuple[list[int], int]:
        """encode_ordinary of UTF-8 `data` with a built-in pattern (PATTERN_IDS), in one C call.

        Returns the ids and how many of them the last piece gave.  The output array and the
        result cells are per-thread scratch, reused: on short texts the call costs little
        more than the C work itself.
        """
        if not data:
            return [], 0
        scratch = _take_scratch(len(data))
        try:
            status = lib.tki_encode_text(
                self._vocab, pattern, ffi.from_buffer(data), len(data), _METHODS[method],
                scratch.out, scratch.capacity, scratch.cells, scratch.cells + 1,
            )
            if status != lib.TKI_OK:
                raise_for_status(status, "encoding failed")
            return _id_list(scratch.out, scratch.cells[0]), scratch.cells[1]
        finally:
            _give_back(scratch)

    def text_encoder(self, pattern: int, *, lean: bool = True) -> Callable[[str | bytes], list[int]]:
        """A function from a str (or its UTF-8 bytes) to `encode_text(pattern, data)[0]`, made
        for many short calls: one C call that reads the str in place and fills the list from
        shared int objects (`lean`, on CPython), else a cffi call whose three arguments are
        set up once, with each thread reusing its own output array.

        ```
        >>> encode = vocab.text_encoder(lib.TKI_PATTERN_CL100K)
        >>> encode("hello world")
        [15339, 1917]
        ```
        """
        if lean and _python_functions is not None:
            return self._python_encoders(pattern)[0]
        handle, run, unpack = self._vocab, lib.tki_encode_job_run, ffi.unpack
        per_thread = threading.local()

        def encode(data: str | bytes) -> list[int]:
            if type(data) is str:
                data = data.encode("utf-8")
            if len(data) > _SCRATCH_KEEP:
                job, out = _encode_job(handle, pattern, len(data))
            else:  # taken while in use: a call nested in this one makes its own
                job, out = per_thread.__dict__.pop("job", None) or _encode_job(handle, pattern, _SCRATCH_KEEP)
            try:
                count = run(job, data, len(data))
                if count < 0:
                    raise_for_status(-count, "encoding failed")
                return unpack(out, count)
            finally:
                if job.out_capacity == _SCRATCH_KEEP:
                    per_thread.job = job, out

        encode.vocab = self  # type: ignore[attr-defined]  # keeps the tables alive
        return encode

    def batch_encoder(self, pattern: int, *, lean: bool = True) -> Callable[..., list[list[int]]]:
        """A function from a list of str (and a thread count, default 1) to their
        `encode_text(pattern, ...)[0]` ids, encoded without the GIL on up to that many threads.
        TypeError for an item that is not a str; lone surrogates are replaced as
        encode_ordinary does (UnicodeEncodeError where the lean functions are not built).

        ```
        >>> vocab.batch_encoder(lib.TKI_PATTERN_CL100K)(["hello world", "", "hi"], 2)
        [[15339, 1917], [], [6151]]
        ```
        """
        if lean and _python_functions is not None:
            return self._python_encoders(pattern)[1]
        handle, run_many, unpack = self._vocab, lib.tki_encode_job_run_many, ffi.unpack
        per_thread = threading.local()  # output kept for the thread's next chunk (no page faults)

        def encode_many(texts: Sequence[str], threads: int = 1) -> list[list[int]]:
            if threads > 1 and len(texts) > 1:  # slices on a pool, each one C call
                from concurrent.futures import ThreadPoolExecutor

                size = -(-len(texts) // (4 * threads))
                slices = [texts[start:start + size] for start in range(0, len(texts), size)]
                with ThreadPoolExecutor(threads) as pool:
                    return [ids for part in pool.map(encode_many, slices) for ids in part]
            for text in texts:
                if not isinstance(text, str):
                    raise TypeError(f"expected str, got {type(text).__name__}")
            encoded = [text.encode("utf-8") for text in texts]
            data = b"".join(encoded)
            text_ends = list(itertools.accumulate(map(len, encoded)))
            job, out = per_thread.__dict__.pop("job", None) or (None, None)  # taken while in use
            if job is None or job.out_capacity < len(data):
                job, out = _encode_job(handle, pattern, len(data))
            try:
                token_ends = _new_uninitialized("uint64_t[]", max(1, len(texts)))
                total = run_many(job, data, ffi.new("size_t[]", text_ends), len(texts), token_ends)
                if total < 0:
                    raise_for_status(-total, "encoding failed")
                ids = memoryview(ffi.buffer(out, 4 * total)).cast("I")  # native uint32, no copy
                ends = unpack(token_ends, len(texts))
                return [ids[start:end].tolist() for start, end in zip([0, *ends], ends)]
            finally:
                if job.out_capacity <= _BATCH_KEEP:
                    per_thread.job = job, out

        encode_many.vocab = self  # type: ignore[attr-defined]  # keeps the tables alive
        return encode_many

    def unless_special_encoder(
        self, pattern: int, refused: "SpecialMatcher | None", compiled: "CompiledPattern | None" = None
    ) -> Callable[[str], list[int] | None] | None:
        """A function that gives encode_ordinary of a str holding no string of `refused`,
        and None for one that holds one (or has lone surrogates, or is no str): the default
        `encode` in one C call.  None where the lean encoders are not available (the batch
        form is `special_batch_encoder` with nothing allowed).

        ```
        >>> encode = vocab.unless_special_encoder(
        ...     lib.TKI_PATTERN_CL100K, SpecialMatcher([b"<|endoftext|>"]))
        >>> encode("hello world"), encode("hi <|endoftext|>")
        ([15339, 1917], None)
        ```
        """
        if _python_functions is None:
            return None
        return self._python_encoders(pattern, refused, compiled)[2]

    def unless_special_counter(
        self, pattern: int, refused: "SpecialMatcher | None", compiled: "CompiledPattern | None" = None
    ) -> Callable[..., int | None] | None:
        """A function `count(text, limit=None)`: the number of ids of a str holding no string
        of `refused` (limit + 1 once more than `limit` are certain), and None for anything
        else (a string of `refused`, lone surrogates, no str, a limit that is no int >= 0):
        the default `count_tokens` in one C call.  `pattern`: a TKI_PATTERN_*, or 0 (each
        stretch is one piece); `compiled` splits instead, if given.  None where the lean
        functions are not available.

        ```
        >>> count = vocab.unless_special_counter(lib.TKI_PATTERN_CL100K, SpecialMatcher([b"<|endoftext|>"]))
        >>> count("hello world"), count("hello world", 1), count("hi <|endoftext|>")
        (2, 2, None)
        ```
        """
        if _python_functions is None:
            return None
        pattern, more = _pattern_arguments(pattern, compiled)
        return _python_functions.counter(
            int(ffi.cast("uintptr_t", self._vocab)), pattern, _matcher_address(refused), (self, refused, compiled),
            *more,
        )

    def special_batch_encoder(
        self, pattern: int, refused: "SpecialMatcher | None", allowed: "SpecialMatcher | None",
        compiled: "CompiledPattern | None" = None,
    ) -> Callable[..., list[list[int] | None]] | None:
        """A function from a list of str (and a thread count, default 1) to the ids of each
        with the strings of `allowed` encoded as their ids, or None for a str that holds a
        string of `refused` (or lone surrogates, or is no str): encode_batch with special
        tokens allowed, in one C call that runs the threads without the GIL.  None where the
        lean encoders are not available.

        ```
        >>> eot = SpecialMatcher([b"<|endoftext|>"], [100257])
        >>> vocab.special_batch_encoder(lib.TKI_PATTERN_CL100K, None, eot)(["hi<|endoftext|>"])
        [[6151, 100257]]
        ```
        """
        if _python_functions is None:
            return None
        pattern, more = _pattern_arguments(pattern, compiled)
        return _python_functions.special_batch_encoder(
            int(ffi.cast("uintptr_t", self._vocab)), pattern, _matcher_address(refused), _matcher_address(allowed),
            (self, refused, allowed, compiled), *more,
        )

    def flat_encoder(
        self, pattern: int, refused: "SpecialMatcher | None", allowed: "SpecialMatcher | None",
        compiled: "CompiledPattern | None" = None,
    ) -> Callable[..., tuple[Any, Any, Any]] | None:
        """A function `encode_flat(texts, threads, lines, eot, id_bytes, accept_bytes, first_offset)` that
        encodes every text as `special_batch_encoder`'s does (`pattern` 0: no pre-split, each
        stretch one piece) on up to `threads` threads without the GIL, and returns
        `(ids, offsets, None)`: all ids in one bytearray of native uint32 (uint16 when
        id_bytes is 2), and in another the native int64 offsets of each document's ids
        (counted from first_offset: those of a part of a larger array); or
        `(None, None, (kind, index, offset))` for the first text that holds a string of
        `refused` ("refused") or, being bytes, is not UTF-8 ("utf8"; byte `offset`).

        Lone surrogates are replaced as encode replaces them; with `lines` every line of a
        text ('\n' left out) is a document; `eot` (an id, or -1) ends each document; bytes
        are taken (and checked to be UTF-8) only with `accept_bytes`, else TypeError, as for
        anything that is not a str.  None where the lean functions are not available.

        ```
        >>> encode_flat = vocab.flat_encoder(lib.TKI_PATTERN_CL100K, None, None)
        >>> ids, offsets, problem = encode_flat(["hello world", "hi"], 2, False, -1, 4, False, 0)
        >>> memoryview(ids).cast("I").tolist(), memoryview(offsets).cast("q").tolist(), problem
        ([15339, 1917, 6151], [0, 2, 3], None)
        ```
        """
        if _python_functions is None:
            return None
        pattern, more = _pattern_arguments(pattern, compiled)
        return _python_functions.flat_encoder(
            int(ffi.cast("uintptr_t", self._vocab)), pattern, _matcher_address(refused), _matcher_address(allowed),
            (self, refused, allowed, compiled), *more,
        )

    def _python_encoders(
        self, pattern: int, refused: "SpecialMatcher | None" = None, compiled: "CompiledPattern | None" = None
    ) -> tuple[Any, ...]:
        """_tki's (encode, encode_many, encode_unless_special) for `pattern` (or the
        `compiled` one) and `refused`; they keep this vocabulary, the pattern and the
        matcher alive."""
        pattern, more = _pattern_arguments(pattern, compiled)
        return _python_functions.encoders(
            int(ffi.cast("uintptr_t", self._vocab)), pattern, _matcher_address(refused), (self, refused, compiled),
            *more,
        )

    def compiled_encoders(self, compiled: "CompiledPattern") -> tuple[Any, Any] | None:
        """(encode, encode_many) of `text_encoder` and `batch_encoder` for a compiled pattern,
        both lean C functions; None where those are not available (cffi then goes through
        CompiledPattern.encode).

        ```
        >>> encode, encode_many = vocab.compiled_encoders(CompiledPattern(program))
        >>> encode("hello world") == encode_many(["hello world"], 2)[0]
        True
        ```
        """
        if _python_functions is None:
            return None
        encode, encode_many, _ = self._python_encoders(0, None, compiled)
        return encode, encode_many

    def ordinary_encoder(
        self, pattern: int, fallback: Callable[[Any], list[int]], compiled: "CompiledPattern | None" = None
    ) -> Callable[[Any], list[int]] | None:
        """A C function from a str to `encode_text(pattern, its UTF-8)[0]` that hands
        anything else (no str, or a str with lone surrogates) to `fallback`; None where the
        lean functions are not available.  `fallback` must not hold the function itself
        (the two would keep each other alive).

        ```
        >>> encode = vocab.ordinary_encoder(lib.TKI_PATTERN_CL100K, lambda text: [])
        >>> encode("hello world"), encode(b"hello")
        ([15339, 1917], [])
        ```
        """
        if _python_functions is None:
            return None
        pattern, more = _pattern_arguments(pattern, compiled)
        return _python_functions.ordinary_encoder(
            int(ffi.cast("uintptr_t", self._vocab)), pattern, (self, compiled), fallback, *more
        )

    def encode_with_specials(
        self, pattern: int, specials: "SpecialMatcher | None", data: bytes, *, method: str = "auto"
    ) -> tuple[list[int], int]:
        """tiktoken's encode of UTF-8 `data` in one C call: the strings of `specials` become
        their ids, each stretch between them is split by `pattern` (a TKI_PATTERN_*, or 0:
        the stretch is one piece) and encoded.

        Returns the ids and how many of them the last piece gave (0 after a special token).
        """
        if not data:
            return [], 0
        scratch = _take_scratch(len(data))
        try:
            status = lib.tki_encode_with_specials(
                self._vocab, pattern, specials._matcher if specials is not None else ffi.NULL,
                ffi.from_buffer(data), len(data), _METHODS[method],
                scratch.out, scratch.capacity, scratch.cells, scratch.cells + 1,
            )
            if status != lib.TKI_OK:
                raise_for_status(status, "encoding failed")
            return _id_list(scratch.out, scratch.cells[0]), scratch.cells[1]
        finally:
            _give_back(scratch)

    def encode_with_specials_buffer(self, pattern: int, specials: "SpecialMatcher | None", data: bytes) -> memoryview:
        """`encode_with_specials` of UTF-8 `data` written straight into one C array, as a
        read-only buffer of native uint32 (no Python list; the view keeps the array alive)."""
        out = _new_uninitialized("uint32_t[]", max(len(data), 1))
        count = ffi.new("size_t *")
        status = lib.tki_encode_with_specials(
            self._vocab, pattern, specials._matcher if specials is not None else ffi.NULL,
            ffi.from_buffer(data), len(data), 0, out, len(data), count, ffi.NULL,
        )
        if status != lib.TKI_OK:
            raise_for_status(status, "encoding failed")
        return memoryview(ffi.buffer(out, 4 * count[0])).cast("I").toreadonly()

    def bounded(
        self, pattern: int, allowed: "SpecialMatcher | None", refused: "SpecialMatcher | None", text: str,
        cap: int | None, want_ids: bool, compiled: "CompiledPattern | None" = None,
    ) -> tuple[list[int] | None, int, bool, int] | int:
        """`encode` of `text` (a str; lone surrogates replaced as tiktoken does), stopping as soon
        as more than `cap` ids are certain, in one C call: the strings of `allowed` become their
        ids, a string of `refused` in the text read is an error.  `pattern`: a TKI_PATTERN_*, or
        0 (each stretch is one piece); `compiled` splits instead, if given.

        Returns (the ids if want_ids and cap was not passed, else None; their count or cap +
        1; whether cap was passed; the bytes of the text's UTF-8 read), or, for a refused
        string, its index in `refused`.

        ```
        >>> vocab.bounded(lib.TKI_PATTERN_CL100K, None, None, "hello world", 2, True)
        ([15339, 1917], 2, False, 11)
        >>> vocab.bounded(lib.TKI_PATTERN_CL100K, None, None, "hello world", 1, True)
        (None, 2, True, 11)
        ```
        """
        if _python_functions is not None:
            return _python_functions.bounded(
                int(ffi.cast("uintptr_t", self._vocab)), pattern, _compiled_address(compiled),
                _matcher_address(allowed), _matcher_address(refused), text, cap, want_ids,
            )
        data = str_utf8(text)
        limit = 2**64 - 1 if cap is None else cap
        out = _new_uninitialized("uint32_t[]", max(1, min(limit + 1, len(data) + 1))) if want_ids else ffi.NULL
        count, consumed = ffi.new("uint64_t *"), ffi.new("size_t *")
        exceeded, error = ffi.new("int32_t *"), ffi.new("tki_stream_error *")
        stream = _new_stream(self, pattern, compiled, allowed, refused)
        status = lib.tki_stream_bounded(stream, ffi.from_buffer(data), len(data), limit, out, count, consumed, exceeded)
        lib.tki_stream_get_error(stream, error)
        if status == lib.TKI_ERR_REFUSED_SPECIAL:
            return error.special_string
        if status != lib.TKI_OK:
            raise_for_status(status, "encoding failed")
        ids = ffi.unpack(out, count[0]) if want_ids and not exceeded[0] else None
        return ids, count[0], bool(exceeded[0]), consumed[0]

    def truncate(
        self, pattern: int, allowed: "SpecialMatcher | None", refused: "SpecialMatcher | None", text: str,
        max_tokens: int, compiled: "CompiledPattern | None" = None,
    ) -> tuple[list[int], int, int] | int:
        """The longest prefix of `text` whose encoding (as `bounded`) has at most `max_tokens`
        ids and starts the encoding of `text`, in one C call that reads the text only as far as
        more than max_tokens ids are certain: (its ids, its length in UTF-8 bytes, in
        characters or -1 when the text had lone surrogates), or a refused string's index.

        ```
        >>> vocab.truncate(lib.TKI_PATTERN_CL100K, None, None, "hello world, and more", 2)
        ([15339, 1917], 11, 11)
        ```
        """
        if _python_functions is not None:
            return _python_functions.truncate(
                int(ffi.cast("uintptr_t", self._vocab)), pattern, _compiled_address(compiled),
                _matcher_address(allowed), _matcher_address(refused), text, max_tokens,
            )
        data = str_utf8(text)
        out = _new_uninitialized("uint32_t[]", max(1, min(max_tokens + 1, len(data) + 1)))
        count, prefix, error = ffi.new("uint64_t *"), ffi.new("size_t *"), ffi.new("tki_stream_error *")
        stream = _new_stream(self, pattern, compiled, allowed, refused)
        status = lib.tki_stream_truncate(stream, ffi.from_buffer(data), len(data), max_tokens, out, count, prefix)
        lib.tki_stream_get_error(stream, error)
        if status == lib.TKI_ERR_REFUSED_SPECIAL:
            return error.special_string
        if status != lib.TKI_OK:
            raise_for_status(status, "encoding failed")
        surrogates = len(data) != len(text.encode("utf-8", "surrogatepass"))
        characters = -1 if surrogates else len(data[: prefix[0]].decode("utf-8"))
        return ffi.unpack(out, count[0]), prefix[0], characters

    def prefix_pass(self, pattern: int, data: bytes) -> memoryview:
        """For every byte end i of UTF-8 `data` (any bytes with pattern 0), the last token of
        the BPE of the first bytes of its piece (`pattern`'s split) up to i, at index i of a
        writable memoryview of native uint32 (index 0: 0): one C pass, 4 bytes per byte,
        written once (the array is not zeroed first: the pass fills every entry).
        ValueError for a vocabulary that is not incremental."""
        last = _new_uninitialized("uint32_t[]", len(data) + 1)
        last[0] = 0
        if data:
            status = lib.tki_prefix_pass(
                self._vocab, pattern, ffi.from_buffer(data), len(data), lib.TKI_PREFIX_SLOT_BEFORE, last + 1
            )
            if status != lib.TKI_OK:
                raise_for_status(status, "prefix pass failed")
        return memoryview(ffi.buffer(last)).cast("I")  # (the view keeps the array alive)

    def token_lengths(self) -> "array[int] | dict[int, int]":
        """id -> byte length of every token (special tokens too): an array indexed by id (0
        for an id with no token) when the ids are dense, else (ids far apart: sparse ranks, or
        a special token's id far above them) a dict of the ids alone, so its size follows the
        number of tokens, not the largest id.  Built once from one C call, then shared.

        ```
        >>> vocab.token_lengths()[2]
        2
        ```
        """
        lengths = self.__dict__.get("_token_lengths")
        if lengths is None:
            with _lengths_lock:
                lengths = self.__dict__.get("_token_lengths")
                if lengths is None:
                    lengths = self._make_token_lengths()
                    self._token_lengths = lengths
        return lengths

    def _make_token_lengths(self) -> "array[int] | dict[int, int]":
        capacity = self.info["token_count"] + self.info["special_count"]
        ids = _new_uninitialized("uint32_t[]", max(1, capacity))
        sizes = _new_uninitialized("uint32_t[]", max(1, capacity))
        count = ffi.new("size_t *")
        status = lib.tki_vocab_list_ids(self._vocab, ids, sizes, capacity, count)
        if status != lib.TKI_OK:
            raise_for_status(status, "cannot list the token lengths")
        id_list, size_list = ffi.unpack(ids, count[0]), ffi.unpack(sizes, count[0])
        span = self.info["max_rank"] + 1
        if self.info["sparse_ids"] or span > _DENSE_IDS_PER_TOKEN * capacity + _DENSE_IDS_SLACK:
            return dict(zip(id_list, size_list))
        lengths = array("I", bytes(4 * span))
        mergeable = self.info["token_count"]
        if mergeable and id_list[mergeable - 1] == mergeable - 1:  # ids 0..n-1: one copy
            lengths[:mergeable] = array("I", size_list[:mergeable])
            id_list, size_list = id_list[mergeable:], size_list[mergeable:]
        for token, size in zip(id_list, size_list):
            lengths[token] = size
        return lengths

    def prefix_last_tokens(self, data: bytes, *, method: str = "auto") -> list[int]:
        """The last token of the BPE of every prefix data[:i+1], in one pass."""
        if not data:
            return []
        out = ffi.new("uint32_t[]", len(data))
        status = lib.tki_prefix_last_tokens(self._vocab, ffi.from_buffer(data), len(data), _METHODS[method], out)
        if status != lib.TKI_OK:
            raise_for_status(status, "prefix pass failed")
        return ffi.unpack(out, len(data))

    # ------------------------------------------------------------------ lookups
    def rank(self, token: bytes) -> int | None:
        """The rank of exactly these bytes, or None."""
        rank = ffi.new("uint32_t *")
        status = lib.tki_token_rank(self._vocab, ffi.from_buffer(token), len(token), rank)
        return rank[0] if status == lib.TKI_OK else None

    def token_bytes(self, rank: int) -> bytes | None:
        """The bytes of a rank (mergeable or special), or None."""
        if not 0 <= rank < 2**32:
            return None
        ptr = ffi.new("uint8_t **")
        size = ffi.new("size_t *")
        if lib.tki_token_bytes(self._vocab, rank, ptr, size) != lib.TKI_OK:
            return None
        return ffi.buffer(ptr[0], size[0])[:]

    # ------------------------------------------------------------------ decode
    def lean_decoders(self) -> tuple[Callable[[Any], Any], ...] | None:
        """(decode_bytes, decode, token_bytes, token_rank), each one C call: decode_bytes and
        decode read a list or tuple of ints in place (decode gives str with invalid UTF-8
        replaced); token_bytes gives the bytes of one id, token_rank the rank of the
        mergeable token that is exactly a str's UTF-8 or a bytes.  Each returns None for
        anything else (an item that is not an int, no such token): the Python paths then
        say what is wrong.  None where these are not available (not CPython).

        ```
        >>> decode_bytes, decode, token_bytes, token_rank = vocab.lean_decoders()
        >>> decode_bytes([2, 2]), decode([2]), decode_bytes([-1]), token_bytes(2), token_rank("ab")
        (b'abab', 'ab', None, b'ab', 2)
        ```
        """
        if _python_functions is None:
            return None
        return _python_functions.decoders(int(ffi.cast("uintptr_t", self._vocab)), self)

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """Concatenated bytes of `tokens`; KeyError('Invalid token for decoding: N') otherwise."""
        if not tokens:
            return b""
        try:
            array = ffi.new("uint32_t[]", tokens)
        except OverflowError:
            raise OverflowError("out of range integral type conversion attempted") from None
        size = ffi.new("size_t *")
        bad = ffi.new("size_t *")
        status = lib.tki_decoded_length(self._vocab, array, len(tokens), size, bad)
        if status == lib.TKI_OK:
            out = ffi.new("uint8_t[]", size[0] or 1)
            status = lib.tki_decode(self._vocab, array, len(tokens), out, size[0], size, bad)
            if status == lib.TKI_OK:
                return ffi.buffer(out, size[0])[:]
        if status == lib.TKI_ERR_UNKNOWN_TOKEN:
            raise KeyError(f"Invalid token for decoding: {tokens[bad[0]]}")
        raise_for_status(status, "decoding failed")
        raise AssertionError("unreachable")


class SpecialMatcher:
    """An immutable set of non-empty byte strings (special tokens), searched in C.

    A search finds the leftmost occurrence, the longest string where several start there;
    successive occurrences do not overlap.  Time is linear in the text.  `ids[i]` is what
    `NativeVocab.encode_with_specials` writes for `strings[i]` (default: i).

    ```
    >>> matcher = SpecialMatcher([b"<|a|>", b"<|a|>b", b"|>"])
    >>> matcher.find_all(b"x<|a|>b|><|a|>")
    [(1, 1), (7, 2), (9, 0)]
    ```
    """

    def __init__(self, strings: Sequence[bytes], ids: Sequence[int] | None = None):
        self.strings: tuple[bytes, ...] = tuple(strings)
        #: What the encoder writes for each string (its index, when no ids were given).
        self.ids: tuple[int, ...] = tuple(ids) if ids is not None else tuple(range(len(self.strings)))
        data, offsets = _pack(self.strings)
        out = ffi.new("tki_special_matcher **")
        error_index = ffi.new("uint32_t *")
        status = lib.tki_special_matcher_build(
            ffi.from_buffer(data), ffi.new("uint64_t[]", offsets),
            ffi.new("uint32_t[]", list(ids)) if ids is not None else ffi.NULL,
            len(self.strings), out, error_index,
        )
        if status != lib.TKI_OK:
            where = self.strings[error_index[0]] if error_index[0] < len(self.strings) else None
            raise_for_status(status, f"cannot build the special-token matcher: string {where!r}")
        self._matcher = ffi.gc(out[0], lib.tki_special_matcher_free)

    def find(self, data: bytes, start: int = 0) -> tuple[int, int] | None:
        """(position, string index) of the first occurrence at or after `start`, or None."""
        scratch = _take_scratch(0)  # this thread's spare: no allocation per call
        try:
            cells, index = scratch.cells, scratch.index
            status = lib.tki_special_matcher_find(
                self._matcher, ffi.from_buffer(data), len(data), start, cells, index, 1, cells + 1
            )
            if status != lib.TKI_OK:
                raise_for_status(status, "special-token search failed")
            return (cells[0], index[0]) if cells[1] else None
        finally:
            _give_back(scratch)

    def open_start(self, data: bytes, start: int = 0) -> int:
        """The leftmost position >= start where the rest of `data` is a proper prefix of a
        string (where one may still start if the text goes on), or len(data)."""
        return lib.tki_special_matcher_open_start(self._matcher, ffi.from_buffer(data), len(data), start)

    def find_all(self, data: bytes, start: int = 0) -> list[tuple[int, int]]:
        """Every occurrence at or after `start`, as (position, string index), left to right."""
        found: list[tuple[int, int]] = []
        batch = 256
        while True:
            more = self._find(data, start, batch)
            found += more
            if len(more) < batch:
                return found
            position, index = more[-1]
            start = position + len(self.strings[index])

    def _find(self, data: bytes, start: int, capacity: int) -> list[tuple[int, int]]:
        starts = _new_uninitialized("size_t[]", capacity)
        indexes = _new_uninitialized("uint32_t[]", capacity)
        count = ffi.new("size_t *")
        status = lib.tki_special_matcher_find(
            self._matcher, ffi.from_buffer(data), len(data), start, starts, indexes, capacity, count
        )
        if status != lib.TKI_OK:
            raise_for_status(status, "special-token search failed")
        return list(zip(ffi.unpack(starts, count[0]), ffi.unpack(indexes, count[0])))


#: What a stream's info() tuple holds, by position.
STREAM_INFO_FIELDS = (
    "status", "reason", "offset", "byte", "special_string",
    "bytes_fed", "tokens_emitted", "pending_bytes", "max_pending_bytes", "live_ends",
)
#: The stream failures the Python layer turns into tiktoken's exceptions.
STATUS_NOMEM: int = lib.TKI_ERR_NOMEM
STATUS_INVALID_UTF8: int = lib.TKI_ERR_INVALID_UTF8
STATUS_REFUSED_SPECIAL: int = lib.TKI_ERR_REFUSED_SPECIAL
STATUS_STREAM_FAILED: int = lib.TKI_ERR_STREAM_FAILED
#: The reasons of TKI_ERR_INVALID_UTF8 (info()'s "reason"), in CPython's words.
UTF8_REASONS = {1: "invalid start byte", 2: "invalid continuation byte", 3: "unexpected end of data"}


class NativeStream:
    """The C stream encoder: feed text, get the ids that have become final.

    `pattern` is a TKI_PATTERN_* (tiktoken's pre-split) or 0 (each stretch between special
    tokens is one piece); `compiled`, if given, splits instead (a custom pattern).  The strings of `allowed` (a SpecialMatcher with ids) become their
    ids and end a stretch; a string of `refused` fails the stream once it is certain.  The
    ids of all feeds plus finish() equal the one-shot encoding.

    `feed` and `finish` return the ids, or None when the stream failed (`info()["status"]`
    then says why; every later call fails too) or when a str chunk holds lone surrogates
    (nothing was fed: replace them and feed the UTF-8 with is_utf8=True).  A stream is for
    one thread at a time: a call while another thread's is under way raises RuntimeError.

    ```
    >>> stream = NativeStream(vocab, 0)
    >>> stream.feed(b"ab") + stream.feed(b"ab") + stream.finish()
    [2, 2]
    ```
    """

    def __init__(
        self, vocab: NativeVocab, pattern: int, *, compiled: "CompiledPattern | None" = None,
        allowed: "SpecialMatcher | None" = None, refused: "SpecialMatcher | None" = None, method: str = "auto",
    ):
        if _python_functions is not None:
            functions = _python_functions.stream_encoder(
                int(ffi.cast("uintptr_t", vocab._vocab)), pattern, _compiled_address(compiled),
                _matcher_address(allowed), _matcher_address(refused), _METHODS[method],
                (vocab, compiled, allowed, refused),
            )
        else:
            functions = _cffi_stream_functions(vocab, pattern, compiled, allowed, refused, _METHODS[method])
        #: feed(chunk, is_utf8=False), finish(), info(): the C functions themselves.
        self.feed, self.finish, self._info = functions

    def info(self) -> dict[str, int]:
        """The stream's failure (status 0: none; see STREAM_INFO_FIELDS) and counters."""
        return dict(zip(STREAM_INFO_FIELDS, self._info()))

    def stats(self) -> dict[str, int]:
        """bytes_fed, tokens_emitted, pending_bytes, max_pending_bytes, live_ends."""
        info = self.info()
        return {name: info[name] for name in STREAM_INFO_FIELDS[5:]}


def _new_stream(
    vocab: NativeVocab, pattern: int, compiled: "CompiledPattern | None", allowed: "SpecialMatcher | None",
    refused: "SpecialMatcher | None", flags: int = 0,
) -> Any:
    """A new C stream (cffi), freed with its Python object."""
    out = ffi.new("tki_stream **")
    allowed_c = allowed._matcher if allowed is not None else ffi.NULL
    refused_c = refused._matcher if refused is not None else ffi.NULL
    if compiled is not None:
        status = lib.tki_stream_new_compiled(vocab._vocab, compiled._pattern, allowed_c, refused_c, flags, out)
    else:
        status = lib.tki_stream_new_with_specials(vocab._vocab, pattern, allowed_c, refused_c, flags, out)
    if status != lib.TKI_OK:
        raise_for_status(status, "cannot start a stream")
    return ffi.gc(out[0], lib.tki_stream_free)


def _cffi_stream_functions(
    vocab: NativeVocab, pattern: int, compiled: "CompiledPattern | None", allowed: "SpecialMatcher | None",
    refused: "SpecialMatcher | None", flags: int,
) -> tuple[Callable[..., list[int] | None], Callable[[], list[int] | None], Callable[[], tuple[int, ...]]]:
    """NativeStream's three functions through cffi (where _tki_python.c is not built)."""
    stream = _new_stream(vocab, pattern, compiled, allowed, refused, flags)
    keep = (vocab, compiled, allowed, refused)  # the tables and matchers live as long as the stream

    def result(status: int, ids: Any, count: int) -> list[int] | None:
        if status == lib.TKI_ERR_BUSY:
            raise RuntimeError("this stream encoder is in use by another thread: a stream encoder is for one "
                               "thread at a time (make one per thread with enc.stream_encoder())")
        return ffi.unpack(ids, count) if status == lib.TKI_OK else None

    def feed(chunk: Any, is_utf8: bool = False) -> list[int] | None:
        if isinstance(chunk, str):
            try:
                chunk = chunk.encode("utf-8")
            except UnicodeEncodeError:
                return None
            is_utf8 = True
        elif not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError(f"feed() takes str or bytes, not {type(chunk).__name__}")
        data = bytes(chunk)
        capacity = lib.tki_stream_pending(stream) + len(data) + 1
        ids, count = _new_uninitialized("uint32_t[]", capacity), ffi.new("size_t *")
        status = lib.tki_stream_feed_checked(stream, ffi.from_buffer(data), len(data), is_utf8, ids, capacity, count)
        return result(status, ids, count[0])

    def finish() -> list[int] | None:
        capacity = lib.tki_stream_pending(stream) + 1
        ids, count = _new_uninitialized("uint32_t[]", capacity), ffi.new("size_t *")
        return result(lib.tki_stream_finish(stream, ids, capacity, count), ids, count[0])

    def info() -> tuple[int, ...]:
        error, stats = ffi.new("tki_stream_error *"), ffi.new("tki_stream_stats *")
        lib.tki_stream_get_error(stream, error)
        lib.tki_stream_get_stats(stream, stats)
        return (error.status, error.reason, error.offset, error.byte, error.special_string, stats.bytes_fed,
                stats.tokens_emitted, stats.pending_bytes, stats.max_pending_bytes, stats.live_ends)

    feed.keep = keep  # type: ignore[attr-defined]  # the tables and matchers outlive the stream
    return feed, finish, info
