"""Bad vocabularies: rank files read by `tiktoken_inc.load.load_tiktoken_bpe` (the loader of
the bundled `.tiktoken` files) and dicts passed to `Encoding`.  Each must give a ValueError
with a useful message -- never a crash and never a silently wrong table.

The files are a valid 258-line base (the 256 single bytes, then b"ab" 256 and b"abc" 257)
with one defect, written to tmp files.  Outcomes (loader without expected_hash):

=========================================  ==================================================
bad input                                  exception
=========================================  ==================================================
malformed base64 (``YQ=x= 300``, line 101) ValueError "<file>, line 101: malformed line ..."
base64 of a bad length (``YWJjZ 300``)     ValueError "<file>, line 101: ... bad base64 (...)"
missing rank (``eHl6``)                    ValueError "<file>, line 101: malformed line ..."
non-integer rank (``eHl6 12a``, ``1.5``)   ValueError "<file>, line 101: malformed line ..."
negative rank (``eHl6 -5``)                ValueError "<file>, line 101: malformed line ..."
duplicate bytes (b"ab" again, line 259)    ValueError "<file>, line 259: token b'ab' already
                                           has a rank (line 257)"
duplicate rank (256 again, line 259)       ValueError "<file>, line 259: rank 256 already
                                           given to line 257"
holes in the ranks (a token at 1000)       legal (as in p50k_base): loads and encodes
rank >= 2**32 in the file                  loads; Encoding raises ValueError "rank 4294967296
                                           of token b'xyz' is not an integer in [0, 2**32 - 1)"
token of 4097 bytes                        loads; Encoding raises ValueError "cannot build the
                                           vocabulary: token b'aaa...' (rank 300): a token is
                                           longer than the core supports (4096 bytes)";
                                           4096 bytes is accepted
missing single byte (no b"\\x00")          loads; Encoding raises ValueError "cannot build the
                                           vocabulary: byte b'\\x00' has no rank: ..."
file cut mid-base64 (last line ``aGVsb``)  ValueError "<file>, line 259: malformed line ..."
file cut after the space (``aGVsbG8= ``)   ValueError "<file>, line 259: malformed line ..."
file cut mid-rank (``aGVsbG8= 3`` of 300)  ValueError "<file>, line 259: rank 3 already
                                           given to line 4"
empty file                                 ValueError "<file>: no tokens (an empty rank file)"
wrong sha256                               ValueError "<file>: sha256 is ..., expected ..."
=========================================  ==================================================

With expected_hash equal to the bad file's own sha256, every defect above still raises: a
matching hash proves the file is the one expected, not that it is well formed.

Dicts given to `Encoding(...)`:

=========================================  ==================================================
duplicate rank                             ValueError "cannot build the vocabulary: token
                                           b'zz' (rank 256): two tokens share one rank"
empty token b""                            ValueError "... token b'' (rank 256): a mergeable
                                           token has no bytes"
negative rank                              ValueError "rank -1 of token b'xy' is not an
                                           integer in [0, 2**32 - 1)"
rank 2**32 (and 2**32 - 1, reserved)       ValueError "rank 4294967296 of token b'xy' ..."
special token reusing a mergeable id       ValueError "... special token b'<|x|>': two
                                           tokens share one rank"
empty dict                                 ValueError "encoding 'x': mergeable_ranks is empty;
                                           ..."
empty special token ""                     ValueError "a special token is the empty string:
                                           give every special token some text"
=========================================  ==================================================
"""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tiktoken_inc import Encoding
from tiktoken_inc.load import load_tiktoken_bpe, sha256_hex

PAT = r"\S+|\s+"
BAD_LINE = 101  # where a defective line is inserted (1-based)


def b64(token: bytes) -> str:
    return base64.b64encode(token).decode()


BASE_LINES = [f"{b64(bytes([i]))} {i}" for i in range(256)] + [f"{b64(b'ab')} 256", f"{b64(b'abc')} 257"]
BASE_RANKS = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"abc": 257}


def with_line(line: str) -> bytes:
    """The base file with `line` inserted as line BAD_LINE."""
    lines = BASE_LINES[: BAD_LINE - 1] + [line] + BASE_LINES[BAD_LINE - 1:]
    return ("\n".join(lines) + "\n").encode()


def appended(*lines: str) -> bytes:
    return ("\n".join(BASE_LINES + list(lines)) + "\n").encode()


BASE_FILE = appended()

#: Defective files whose problem is a line: (content, the line number the error must name).
LINE_DEFECTS = {
    "malformed base64": (with_line("YQ=x= 300"), BAD_LINE),
    "base64 of a bad length": (with_line("YWJjZ 300"), BAD_LINE),
    "missing rank": (with_line(b64(b"xyz")), BAD_LINE),
    "missing rank, trailing space": (with_line(b64(b"xyz") + " "), BAD_LINE),
    "non-integer rank": (with_line(b64(b"xyz") + " 12a"), BAD_LINE),
    "fractional rank": (with_line(b64(b"xyz") + " 1.5"), BAD_LINE),
    "negative rank": (with_line(b64(b"xyz") + " -5"), BAD_LINE),
    "three fields": (with_line(b64(b"xyz") + " 300 1"), BAD_LINE),
    "NUL in the rank": (with_line(b64(b"xyz") + " 30\x000"), BAD_LINE),
    "duplicate bytes": (appended(f"{b64(b'ab')} 300"), 259),
    "duplicate rank": (appended(f"{b64(b'xy')} 256"), 259),
    "cut mid-base64": (BASE_FILE + b64(b"hello world").encode()[:5], 259),
    "cut after the space": (BASE_FILE + f"{b64(b'hello')} ".encode(), 259),
    "cut mid-rank": (BASE_FILE + f"{b64(b'hello')} 3".encode(), 259),
    "tab separator": (with_line(b64(b"xyz") + "\t300"), BAD_LINE),
    "leading space": (with_line(" " + b64(b"xyz") + " 300"), BAD_LINE),
    "plus sign": (with_line(b64(b"xyz") + " +300"), BAD_LINE),
    "underscore in the rank": (with_line(b64(b"xyz") + " 3_00"), BAD_LINE),
    "whitespace-only line": (with_line("  "), BAD_LINE),
}

def write(tmp_path: Path, content: bytes, name: str = "vocab.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def build(ranks: dict[bytes, int], special_tokens: dict[str, int] | None = None) -> Encoding:
    return Encoding("bad", pat_str=PAT, mergeable_ranks=ranks, special_tokens=special_tokens or {})


# --------------------------------------------------------------------------- files


def test_base_file_loads(tmp_path):
    """The defect-free base file loads, with and without its hash, and builds an Encoding."""
    path = write(tmp_path, BASE_FILE)
    assert load_tiktoken_bpe(path) == BASE_RANKS
    assert load_tiktoken_bpe(path, expected_hash=sha256_hex(BASE_FILE)) == BASE_RANKS
    assert build(BASE_RANKS).encode("abc ab") == [257, 32, 256]


@pytest.mark.parametrize("defect", sorted(LINE_DEFECTS))
def test_line_defect_names_file_and_line(defect, tmp_path):
    """Each line defect: ValueError naming the file and the line."""
    content, line = LINE_DEFECTS[defect]
    path = write(tmp_path, content)
    with pytest.raises(ValueError) as info:
        load_tiktoken_bpe(path)
    message = str(info.value)
    assert str(path) in message and f"line {line}" in message, message


@pytest.mark.parametrize(
    "defect",
    [
        defect for defect in sorted(LINE_DEFECTS)
    ],
)
def test_line_defect_with_matching_hash(defect, tmp_path):
    """A matching sha256 proves the file is the one expected, not that it is well formed: the
    defect must still give a ValueError (from the loader, or at the latest when building)."""
    content, _ = LINE_DEFECTS[defect]
    path = write(tmp_path, content)
    with pytest.raises(ValueError):
        build(load_tiktoken_bpe(path, expected_hash=sha256_hex(content)))


def test_holes_in_ranks_are_legal(tmp_path):
    """Ranks need not be contiguous (p50k_base has holes): the file loads and encodes."""
    path = write(tmp_path, appended(f"{b64(b'xy')} 1000"))
    ranks = load_tiktoken_bpe(path)
    assert ranks[b"xy"] == 1000 and len(ranks) == 259
    enc = build(ranks)
    assert enc.encode("xy abc") == [1000, 32, 257]
    assert enc.decode([1000]) == "xy"
    assert enc.count_tokens("xy xy", limit=2) is None


def test_rank_out_of_range_in_file(tmp_path):
    """A rank >= 2**32 in a file: the loader keeps it, building the Encoding raises."""
    path = write(tmp_path, appended(f"{b64(b'xyz')} {2**32}"))
    with pytest.raises(ValueError, match="4294967296"):
        build(load_tiktoken_bpe(path))


def test_token_longer_than_the_incremental_algorithm_takes(tmp_path):
    """A 4097-byte token is built, as tiktoken builds it, and encoded with the heap BPE;
    4096 bytes is the longest the incremental algorithm takes."""
    import tiktoken

    ranks = load_tiktoken_bpe(write(tmp_path, appended(f"{b64(b'a' * 4097)} 300")))
    long = build(ranks)
    assert not long.incremental
    reference = tiktoken.Encoding("bad", pat_str=PAT, mergeable_ranks=ranks, special_tokens={})
    for text in ("a" * 4097, "a" * 4098 + " b", "hello"):
        assert long.encode(text) == reference.encode(text)
    ranks = load_tiktoken_bpe(write(tmp_path, appended(f"{b64(b'a' * 4096)} 300"), "ok.tiktoken"))
    assert build(ranks).encode("a" * 4096) == [300] and build(ranks).incremental


def test_missing_single_byte(tmp_path):
    """A file without b"\\x00" is built; a text with that byte raises ValueError when encoded."""
    ranks = load_tiktoken_bpe(write(tmp_path, ("\n".join(BASE_LINES[1:]) + "\n").encode()))
    enc = build(ranks)
    assert enc.encode("hello") == [ranks[bytes([c])] for c in b"hello"]
    with pytest.raises(ValueError, match="byte that this vocabulary cannot encode"):
        enc.encode("a\x00b")


def test_empty_file(tmp_path):
    """An empty file: ValueError naming the file."""
    path = write(tmp_path, b"")
    with pytest.raises(ValueError) as info:
        load_tiktoken_bpe(path)
    assert str(path) in str(info.value)


def test_wrong_sha256(tmp_path):
    """A file whose sha256 differs from the expected one: ValueError naming the file."""
    path = write(tmp_path, BASE_FILE)
    with pytest.raises(ValueError) as info:
        load_tiktoken_bpe(path, expected_hash="0" * 64)
    message = str(info.value)
    assert str(path) in message and "sha256" in message


# --------------------------------------------------------------------------- dicts


@pytest.mark.parametrize(
    "ranks, expected",
    [
        (BASE_RANKS | {b"xy": 300, b"zz": 300}, "share one rank"),
        (BASE_RANKS | {b"xy": -1}, r"rank -1 of token b'xy'"),
        (BASE_RANKS | {b"xy": 2**32}, r"rank 4294967296 of token b'xy'"),
        (BASE_RANKS | {b"xy": 2**32 - 1}, r"rank 4294967295 of token b'xy'"),
        (BASE_RANKS | {b"xy": 1.5}, r"rank 1.5 of token b'xy'"),
    ],
    ids=["duplicate rank", "negative rank", "rank 2**32", "rank 2**32-1", "float rank"],
)
def test_bad_dicts(ranks, expected):
    """Encoding(...) from a bad mergeable_ranks dict: ValueError naming the problem."""
    with pytest.raises(ValueError, match=expected):
        build(ranks)


def test_special_token_reusing_a_mergeable_id():
    """A special token whose id is a mergeable token's is built, as tiktoken builds it: the
    special encodes to that id, which decodes as the mergeable token (tiktoken's order)."""
    import tiktoken

    ours = build(BASE_RANKS, {"<|x|>": 5})
    theirs = tiktoken.Encoding("bad", pat_str=PAT, mergeable_ranks=BASE_RANKS, special_tokens={"<|x|>": 5})
    assert ours.encode("a<|x|>", allowed_special="all") == theirs.encode("a<|x|>", allowed_special="all")
    assert ours.decode_bytes([5]) == theirs.decode_bytes([5])
    assert ours.decode_single_token_bytes(5) == theirs.decode_single_token_bytes(5)


def test_empty_dict():
    """An empty mergeable_ranks: a ValueError that says what is wrong with the vocabulary."""
    with pytest.raises(ValueError) as info:
        build({})
    assert "max()" not in str(info.value)


def test_empty_special_token():
    """A special token with empty text is built, as tiktoken builds it.  Its text occurs in
    every text: encode refuses it by default (as tiktoken), and allowing it raises a
    ValueError that says why (tiktoken never returns)."""
    import tiktoken

    ours = build(BASE_RANKS, {"": 300})
    theirs = tiktoken.Encoding("bad", pat_str=PAT, mergeable_ranks=BASE_RANKS, special_tokens={"": 300})
    assert ours.encode_ordinary("ab") == theirs.encode_ordinary("ab")
    assert ours.encode("ab", disallowed_special=()) == theirs.encode("ab", disallowed_special=())
    assert ours.decode_bytes([300]) == theirs.decode_bytes([300]) == b""
    with pytest.raises(ValueError, match="disallowed special token ''"):
        ours.encode("ab")
    with pytest.raises(ValueError, match="empty text occurs at every position"):
        ours.encode("ab", allowed_special="all")


# --------------------------------------------------------------------------- C reader == Python reader

# Random files made of good and bad line parts exercise every rule of the reader (load.py's
# pure-Python parser is the reference for the C one in csrc/rank_file.c).
_TOKENS = ["YQ==", "Yg==", "YWI=", "YWJj", "YWJjZA==", "AA==", "//8=", "YWJj=", "YWJj==", "YWI==",
           "YWJjZ", "YWJjZA", "YWJjZA=", "YQ=", "YQ", "YQ===", "Y", "", "=", "Y Q==", "é", "\x00"]
_SEPARATORS = [" "] * 8 + ["", "  ", "\t", "\r"]
_RANKS = [str(i) for i in range(6)] * 3 + ["007", "256", "4294967294", "4294967295", "99999999999999999999",
                                           "", "-5", "1.5", "3_00", "+3", "1 2", " "]
_ENDS = ["\n"] * 6 + ["\r\n", "\n\n", "\n\r\n", "\r", "\r\r\n", ""]


def _random_file(rng) -> bytes:
    lines = []
    for _ in range(rng.randrange(0, 6)):
        if rng.random() < 0.5:
            lines.append(f"{b64(bytes([rng.randrange(4)]))} {rng.randrange(8)}\n")
        else:
            lines.append(rng.choice(_TOKENS) + rng.choice(_SEPARATORS) + rng.choice(_RANKS) + rng.choice(_ENDS))
    return "".join(lines).encode()


@pytest.mark.parametrize("seed", range(3))
def test_c_reader_matches_python_reader(seed):
    """Random files: the C reader gives the Python reader's dict, or its error message word
    for word."""
    import random

    from tiktoken_inc.load import parse_tiktoken_bpe, parse_tiktoken_bpe_python

    rng = random.Random(seed)
    for _ in range(3000):
        data = _random_file(rng)
        try:
            want = ("ok", parse_tiktoken_bpe_python(data, "f"))
        except ValueError as e:
            want = ("error", str(e))
        try:
            got = ("ok", parse_tiktoken_bpe(data, "f"))
        except ValueError as e:
            got = ("error", str(e))
        assert got == want, data
