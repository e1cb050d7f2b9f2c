"""Encodings without pre-splitting: `get_encoding(name, pretokenize=False)`.

The reference is tiktoken's `Encoding._encode_single_piece` (whole-piece shortcut, else BPE
of the bytes): encode_ordinary(text) must equal it on the whole text, and encode(text, ...)
must equal it on each stretch between allowed special tokens, with the special ids between
and tiktoken's errors for disallowed specials.  Also: random text and runs for the five main
encodings, caching, repr and pickling, `Encoding(pat_str=None)`, the other encode methods,
and linear time on 2^20 bytes of one repeated character.
"""
from __future__ import annotations

import pickle
import time

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
from support import MAIN_ENCODINGS

ALPHABET = list("aZéß'’ \t\r\n\u00a0\u3000中文字0123456789!?.<|>/sStT") + ["😀", "👍🏽", "<|endoftext|>", "'re", "    "]
texts = st.one_of(
    st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)


@pytest.fixture(scope="module")
def pairs(reference):
    """[(name, ours without pre-split, tiktoken's)] for the main encodings."""
    return [(name, tiktoken_inc.get_encoding(name, pretokenize=False), reference(name)) for name in MAIN_ENCODINGS]


def reference_encode(theirs, text: str, allowed: set[str]) -> list[int]:
    """tiktoken's _encode_single_piece on each stretch between allowed specials."""
    if not allowed:
        return theirs._encode_single_piece(text) if text else []
    ids: list[int] = []
    pattern = regex.compile("|".join(regex.escape(t) for t in sorted(allowed, key=len, reverse=True)))
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            ids += theirs._encode_single_piece(text[start:match.start()])
        ids.append(theirs._special_tokens[match.group()])
        start = match.end()
    if start < len(text):
        ids += theirs._encode_single_piece(text[start:])
    return ids


@settings(max_examples=600, deadline=None)
@given(text=texts)
def test_random_text(pairs, text):
    for name, ours, theirs in pairs:
        want = reference_encode(theirs, text, set())
        assert ours.encode_ordinary(text) == want, name
        assert ours.encode(text, disallowed_special=()) == want, name
        assert ours._encode_single_piece(text) == want, name
        assert ours.decode(want) == text, name
        allowed = theirs.special_tokens_set
        assert ours.encode(text, allowed_special="all") == reference_encode(theirs, text, allowed), name


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_runs_and_specials(name, reference):
    ours, theirs = tiktoken_inc.get_encoding(name, pretokenize=False), reference(name)
    for char in ["a", " ", "\n", "0", "中", "😀", "'"]:
        for n in [1, 2, 3, 7, 64, 127, 128, 129, 500, 2000]:
            text = char * n
            assert ours.encode_ordinary(text) == theirs._encode_single_piece(text), (char, n)
    text = "hello <|endoftext|> world<|endoftext|><|endoftext|>!"
    assert ours.encode(text, allowed_special="all") == reference_encode(theirs, text, {"<|endoftext|>"})
    with pytest.raises(ValueError) as ours_error:
        ours.encode(text)
    with pytest.raises(ValueError) as theirs_error:
        theirs.encode(text)
    assert str(ours_error.value) == str(theirs_error.value)


def test_registry_cache_repr_pickle():
    plain = tiktoken_inc.get_encoding("cl100k_base")
    one_piece = tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)
    assert one_piece is tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)
    assert one_piece is not plain and plain.pretokenize and not one_piece.pretokenize
    assert one_piece._core_bpe._vocab is plain._core_bpe._vocab  # the C tables are shared
    assert repr(one_piece) == "<Encoding 'cl100k_base' pretokenize=False>"
    assert one_piece.name == "cl100k_base" and one_piece.n_vocab == plain.n_vocab
    again = pickle.loads(pickle.dumps(one_piece))
    assert again.pretokenize is False and again.encode("a b c") == one_piece.encode("a b c")
    assert pickle.loads(pickle.dumps(plain)).pretokenize is True
    with pytest.raises(TypeError, match="pretokenize"):
        tiktoken_inc.get_encoding("cl100k_base", pretokenize="no")


def test_encoding_without_pattern():
    """Encoding(pat_str=None): no pre-split (pretokenize False); pretokenize=True needs a pattern."""
    ranks = {bytes([b]): b for b in range(256)} | {b" a": 256, b"ab": 257, b"xyz": 258}
    enc = tiktoken_inc.Encoding("toy", pat_str=None, mergeable_ranks=ranks, special_tokens={"<|x|>": 259})
    assert not enc.pretokenize and repr(enc) == "<Encoding 'toy' pretokenize=False>"
    assert enc.encode("ab ab") == [257, 256, 98]  # one piece: " a" merges across the space first
    assert enc.encode("xyz") == [258] and enc.encode("xyzxyz") == list(b"xyzxyz")  # whole-piece shortcut
    assert enc.encode("ab<|x|>ab", allowed_special="all") == [257, 259, 257]
    clone = pickle.loads(pickle.dumps(enc))
    assert not clone.pretokenize and clone.encode("ab ab") == [257, 256, 98]
    with pytest.raises(ValueError, match="needs a pat_str"):
        tiktoken_inc.Encoding("bad", pat_str=None, mergeable_ranks=ranks, special_tokens={}, pretokenize=True)
    regex_version = tiktoken_inc.Encoding("toy", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    assert regex_version.encode("ab ab") == [257, 32, 257]


def test_other_methods_follow_the_mode():
    enc = tiktoken_inc.get_encoding("o200k_base", pretokenize=False)
    text = "Hello world, hello   world!\n\nAnd 12345 more."
    want = enc._encode_single_piece(text)
    assert enc.encode_to_numpy(text).tolist() == want
    assert enc.encode_batch([text, text]) == [want, want]
    assert enc.encode_ordinary_batch([text]) == [want]
    assert enc._encode_only_native_bpe(text) == want
    assert enc._encode_bytes(text.encode() + b"\xff") == enc._encode_single_piece(text.encode() + b"\xff")
    stable, completions = enc.encode_with_unstable("hello wor")
    assert all(enc.decode_bytes(stable + c).startswith(b"hello wor") for c in completions)


@pytest.mark.parametrize("char", [" ", "a"])
def test_linear_time(char):
    """2^18 and 2^20 copies of one character as one piece: time grows at most 8x for 4x."""
    enc = tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)

    def seconds(n: int) -> float:
        start = time.perf_counter()
        ids = enc.encode_ordinary(char * n)
        elapsed = time.perf_counter() - start
        assert enc.decode(ids) == char * n
        return elapsed

    small = min(seconds(1 << 18) for _ in range(3))
    large = min(seconds(1 << 20) for _ in range(2))
    assert large <= 8 * small + 0.05, (small, large)
