"""Reading `.tiktoken` rank files: one `base64(token bytes) SPACE rank` per line.

```
>>> ranks = load_tiktoken_bpe("ranks/r50k_base.tiktoken")
>>> ranks[b"hello"]
31373
```
"""
from __future__ import annotations

import binascii
import os
import re
import sys
from typing import Any, Union

from tiktoken_inc._native import NativeVocab, RankFileProblem, parse_rank_file

PathLike = Union[str, "os.PathLike[str]"]

#: tiktoken's own helpers for files and URLs (tiktoken is a dependency), found here as in
#: `tiktoken.load`: the same behaviour, downloads and caching included.  Imported on first
#: use (importing tiktoken, and hashlib's OpenSSL with it, is not free).
_FROM_TIKTOKEN = ("check_hash", "data_gym_to_mergeable_bpe_ranks", "dump_tiktoken_bpe", "read_file", "read_file_cached")


def __getattr__(name: str) -> Any:
    if name in _FROM_TIKTOKEN:
        import tiktoken.load

        return getattr(tiktoken.load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# One well-formed line; blank lines are allowed (and skipped), as in tiktoken's loader.
_LINE = rb"[A-Za-z0-9+/]+={0,2} [0-9]+"
_FILE = re.compile(rb"(?:(?:" + _LINE + rb")?\r?\n)*(?:" + _LINE + rb")?")
_LINE_RE = re.compile(_LINE + rb"\r?")


def new_sha256() -> Any:
    """A new sha256 hash object (`update`, `hexdigest`), as `hashlib.sha256()` makes.

    On CPython it comes from the interpreter's own sha256 module, which `hashlib` falls
    back on: importing `hashlib` loads OpenSSL's libcrypto, ~3.7 MiB resident for the
    life of the process, to hash a 4 MB rank file (the builtin takes ~13 ms, OpenSSL 2).

    ```
    >>> new_sha256().hexdigest()[:16]
    'e3b0c44298fc1c14'
    ```
    """
    if sys.implementation.name == "cpython":
        for name in ("_sha2", "_sha256"):  # 3.12+, older
            try:
                return __import__(name).sha256()
            except (ImportError, AttributeError):
                continue
    import hashlib

    return hashlib.sha256()


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data` as 64 lowercase hex digits.

    ```
    >>> sha256_hex(b"")[:16]
    'e3b0c44298fc1c14'
    ```
    """
    digest = new_sha256()
    digest.update(data)
    return digest.hexdigest()


def load_tiktoken_bpe(path: PathLike, expected_hash: str | None = None) -> dict[bytes, int]:
    """Reads a rank file from disk; checks its sha256 first when `expected_hash` is given.

    Raises ValueError naming the file when the hash differs, and naming the file and the
    line when a line is malformed, a token appears twice or two tokens share a rank.

    ```
    >>> sha = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
    >>> load_tiktoken_bpe("ranks/r50k_base.tiktoken", expected_hash=sha)[b"!"]
    0
    ```
    """
    return parse_tiktoken_bpe(read_rank_file(path, expected_hash), os.fspath(path))


def read_rank_file(path: PathLike, expected_hash: str | None = None) -> bytes:
    """The bytes of a rank file; checks their sha256 first when `expected_hash` is given.

    A URL (`https://...`, or a blobfile path) is read as tiktoken reads it, through its
    download cache (`read_file_cached`)."""
    if isinstance(path, str) and "://" in path:
        from tiktoken.load import read_file_cached

        return read_file_cached(path, expected_hash)
    with open(path, "rb") as f:
        data = f.read()
    if expected_hash is not None:
        actual = sha256_hex(data)
        if actual != expected_hash.lower():
            raise ValueError(
                f"{os.fspath(path)}: sha256 is {actual}, expected {expected_hash}; the file is "
                "corrupted or not the rank file it claims to be (reinstall the package or fix the path)"
            )
    return data


def parse_tiktoken_bpe(data: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Parses rank-file content, validating every line; `source` names it in errors.

    The C core reads and checks the file (csrc/rank_file.c, the same rules as
    `parse_tiktoken_bpe_python`); only the dict is made here.

    ```
    >>> parse_tiktoken_bpe(b"YQ== 0\\nYg== 1\\n")
    {b'a': 0, b'b': 1}
    >>> parse_tiktoken_bpe(b"YQ== 0\\nnot a line\\n", "my.tiktoken")
    Traceback (most recent call last):
    ValueError: my.tiktoken, line 2: malformed line b'not a line': expected '<base64 token> <rank>'
    ```
    """
    tokens, ranks, problem = parse_rank_file(data)
    if problem is not None:
        if problem.status == "rank out of range":
            return parse_tiktoken_bpe_python(data, source)  # Python ints hold any rank
        raise rank_file_error(data, source, problem)
    return dict(zip(tokens, ranks))


def vocab_from_rank_file(data: bytes, special_tokens: dict[str, int], source: str = "<bytes>") -> NativeVocab:
    """The C tables for the tokens of rank-file content `data` and `special_tokens`, read in
    C (no Python object per token).  Raises the ValueError `parse_tiktoken_bpe` raises for a
    malformed file, and the one `NativeVocab(parse_tiktoken_bpe(data), special_tokens)`
    raises for a vocabulary the core cannot use.
    """
    built = NativeVocab.from_rank_file(data, special_tokens)
    if isinstance(built, NativeVocab):
        return built
    if built is not None:
        raise rank_file_error(data, source, built)
    # A problem of the vocabulary (or a rank too large for C): the dict path finds the
    # problem load_tiktoken_bpe + NativeVocab report first, and raises it.
    return NativeVocab(parse_tiktoken_bpe(data, source), special_tokens)


def rank_file_error(data: bytes, source: str, problem: RankFileProblem) -> ValueError:
    """The ValueError `parse_tiktoken_bpe_python` raises for this problem, word for word."""
    line = data[problem.line_start:problem.line_end]
    where = f"{source}, line {problem.line}"
    if problem.status == "no tokens":
        return ValueError(f"{source}: no tokens (an empty rank file)")
    if problem.line == 0:
        return ValueError(f"{source}: malformed rank file")
    if problem.status == "bad base64":
        try:
            binascii.a2b_base64(line.split()[0])
            detail = "bad base64"
        except binascii.Error as e:
            detail = f"bad base64 ({e})"
        return ValueError(f"{where}: malformed line {line[:80]!r}: {detail}")
    if problem.status == "duplicate token":
        token = binascii.a2b_base64(line.split()[0])
        return ValueError(f"{where}: token {token!r} already has a rank (line {problem.earlier_line})")
    if problem.status == "duplicate rank":
        rank = int(line.split()[1])
        return ValueError(f"{where}: rank {rank} already given to line {problem.earlier_line}")
    return ValueError(f"{where}: malformed line {line[:80]!r}: expected '<base64 token> <rank>'")


def parse_tiktoken_bpe_python(data: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """`parse_tiktoken_bpe` in pure Python: the reference for the C reader, and the reader
    of files with ranks too large for the C core (2**32 - 1 or more: the Encoding refuses
    them later, naming the token).

    ```
    >>> parse_tiktoken_bpe_python(b"YQ== 0\\nYg== 4294967296\\n")
    {b'a': 0, b'b': 4294967296}
    ```
    """
    if _FILE.fullmatch(data) is None:
        _raise_first_bad_line(data, source)
    ranks = _parse(data, source)
    if not ranks:
        raise ValueError(f"{source}: no tokens (an empty rank file)")
    lines = sum(1 for line in data.splitlines() if line)
    if len(ranks) != lines or len(set(ranks.values())) != len(ranks):
        _raise_first_duplicate(data, source)
    return ranks


def _parse(data: bytes, source: str) -> dict[bytes, int]:
    """The fast path: whitespace split, then base64 and int over the two columns."""
    fields = data.split()
    if len(fields) % 2:
        _raise_first_bad_line(data, source)
    try:
        return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))
    except (binascii.Error, ValueError):
        _raise_first_bad_line(data, source)
        raise


def _raise_first_bad_line(data: bytes, source: str) -> None:
    """Raises ValueError for the first line that is not `base64 SPACE rank`."""
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line in (b"", b"\r"):
            continue
        problem = ""
        if _LINE_RE.fullmatch(line) is None:
            problem = "expected '<base64 token> <rank>'"
        else:
            try:
                binascii.a2b_base64(line.split()[0])
            except binascii.Error as e:
                problem = f"bad base64 ({e})"
        if problem:
            raise ValueError(f"{source}, line {number}: malformed line {line[:80]!r}: {problem}")
    raise ValueError(f"{source}: malformed rank file")


def _raise_first_duplicate(data: bytes, source: str) -> None:
    """Raises ValueError for the first line repeating an earlier token or rank."""
    tokens: dict[bytes, int] = {}
    ranks: dict[int, int] = {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line in (b"", b"\r"):
            continue
        token_b64, rank_text = line.split()
        token, rank = binascii.a2b_base64(token_b64), int(rank_text)
        if token in tokens:
            raise ValueError(f"{source}, line {number}: token {token!r} already has a rank (line {tokens[token]})")
        if rank in ranks:
            raise ValueError(f"{source}, line {number}: rank {rank} already given to line {ranks[rank]}")
        tokens[token], ranks[rank] = number, number
    raise ValueError(f"{source}: duplicate tokens or ranks")
