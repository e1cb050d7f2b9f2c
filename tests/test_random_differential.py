"""Property-based differential tests against tiktoken (hypothesis), every encoding per example.

- random Unicode text from a wide alphabet (letters, marks, digits, apostrophes, whitespace,
  \\r, \\n, NBSP, NEL, line separators, CJK, emoji, letters that case-fold to ASCII; no
  surrogates): encode_ordinary, encode, round trip;
- random text with lone surrogates: encode and encode_ordinary;
- random bytes, and valid UTF-8 cut at random: _encode_bytes;
- random concatenations of vocabulary tokens (random ids decoded and joined, then
  re-encoded by both): _encode_bytes, and encode_ordinary when the bytes are valid UTF-8;
- random id lists: decode_bytes, decode, decode_with_offsets;
- short random texts: encode_with_unstable (stable ids equal, completions equal as sets).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import ALL_ENCODINGS, MAIN_ENCODINGS

# Characters the patterns treat specially, plus a sample of scripts.
NOTABLE = list(
    "aZéß'’ \t\r\n\u00a0\u2003\u3000\u200b0123456789٣²中文字日本語한국어Ωж"
    "\u0301\u0300\u0903!?.,;:-_/\\<|>{}()[]\"#@$%^&*+=~`"
) + ["😀", "👍🏽", "🇫🇷", "❤️", "\u200d", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "<|endoftext|>"] + [
    # ſ folds to s, so "'ſ" is a contraction where a pattern matches them case-insensitively
    # (the Kelvin sign folds to k);
    # NEL, the line and paragraph separators, VT and FF are \s but not \r or \n.
    "\u017f", "'\u017f", "\u212a", "\u0085", "\u2028", "\u2029", "\x0b", "\x0c",
]

wide_chars = st.one_of(st.sampled_from(NOTABLE), st.characters(exclude_categories=("Cs",)))
wide_text = st.lists(wide_chars, max_size=80).map("".join)
surrogate_text = st.lists(st.one_of(wide_chars, st.characters(categories=("Cs",))), max_size=40).map("".join)


@pytest.fixture(scope="module")
def pairs(encoding, reference):
    """[(name, ours, tiktoken's)] for every encoding."""
    return [(name, encoding(name), reference(name)) for name in ALL_ENCODINGS]


@pytest.fixture(scope="module")
def main_pairs(pairs):
    return [p for p in pairs if p[0] in MAIN_ENCODINGS]


@pytest.fixture(scope="module")
def token_values(main_pairs):
    """{name: every mergeable token's bytes} (tiktoken's token_byte_values, fetched once)."""
    return {name: theirs.token_byte_values() for name, _, theirs in main_pairs}


@settings(max_examples=1000, deadline=None)
@given(text=wide_text)
def test_random_text(text, pairs):
    """encode_ordinary, encode(disallowed_special=()), encode(allowed_special="all"), round trip."""
    for name, ours, theirs in pairs:
        want = theirs.encode_ordinary(text)
        assert ours.encode_ordinary(text) == want, name
        assert ours.encode(text, disallowed_special=()) == want, name
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), name
        assert ours.decode(want) == text, name


@settings(max_examples=300, deadline=None)
@given(text=surrogate_text)
def test_random_text_with_surrogates(text, main_pairs):
    """Lone surrogates are replaced exactly as tiktoken replaces them."""
    for name, ours, theirs in main_pairs:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), name
        assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=()), name


@settings(max_examples=500, deadline=None)
@given(data=st.one_of(st.binary(max_size=120), wide_text.map(str.encode).flatmap(
    lambda b: st.integers(0, len(b)).map(lambda k: b[:k]))))
def test_random_bytes(data, main_pairs):
    """_encode_bytes on random bytes and on valid UTF-8 truncated at a random byte."""
    for name, ours, theirs in main_pairs:
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), name


@settings(max_examples=500, deadline=None)
@given(picks=st.lists(st.integers(0, 2**31), min_size=1, max_size=40))
def test_token_concatenations(picks, main_pairs, token_values):
    """Random token ids decoded and joined, then re-encoded by both encoders."""
    for name, ours, theirs in main_pairs:
        values = token_values[name]
        data = b"".join(values[p % len(values)] for p in picks)
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), name
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), name


@settings(max_examples=300, deadline=None)
@given(picks=st.lists(st.integers(0, 2**31), max_size=30))
def test_random_id_lists_decode(picks, pairs):
    """decode_bytes, decode and decode_with_offsets (or its error) on random valid id lists."""
    for name, ours, theirs in pairs:
        tokens = [p % (theirs.max_token_value + 1) for p in picks]
        try:
            want = theirs.decode_bytes(tokens)
        except KeyError as exc:  # a hole in the id space
            with pytest.raises(KeyError) as mine:
                ours.decode_bytes(tokens)
            assert mine.value.args == exc.args
            continue
        assert ours.decode_bytes(tokens) == want, name
        assert ours.decode(tokens) == theirs.decode(tokens), name
        try:
            want_offsets = theirs.decode_with_offsets(tokens)
        except UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                ours.decode_with_offsets(tokens)
            continue
        assert ours.decode_with_offsets(tokens) == want_offsets, name


@settings(max_examples=200, deadline=None)
@given(text=st.lists(wide_chars, max_size=12).map("".join).map(str.rstrip))
def test_encode_with_unstable(text, main_pairs):
    """encode_with_unstable on short random texts: stable ids equal; completions equal as sets.
    (Trailing whitespace is stripped: it yields ~10^5 completions, covered in test_encoding_api.)"""
    for name, ours, theirs in main_pairs:
        stable, completions = ours.encode_with_unstable(text, disallowed_special=())
        want_stable, want_completions = theirs.encode_with_unstable(text, disallowed_special=())
        assert stable == want_stable, name
        assert {tuple(c) for c in completions} == {tuple(c) for c in want_completions}, name
