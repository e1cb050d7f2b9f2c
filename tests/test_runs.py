"""Runs of one character, the classic worst case of BPE, against tiktoken for every encoding.

Characters: "a", " ", "\\n", "0", "'", "中", "😀", "\\t".  Lengths: every length 1..300 and a
spread of larger lengths up to 10,000.  Each run is encoded alone and between two letters
(so whitespace runs meet the `\\s+(?!\\S)` rules); ids must equal tiktoken's.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import LIGHT_ENCODINGS, MAIN_ENCODINGS

CHARS = ["a", " ", "\n", "0", "'", "中", "😀", "\t"]
LARGE_LENGTHS = [301, 383, 500, 511, 512, 513, 640, 777, 1000, 1023, 1024, 1025, 1500, 2000, 2047, 2048,
                 2049, 3000, 4095, 4096, 4097, 5000, 6143, 7777, 8191, 8192, 9999, 10_000]
LENGTHS = list(range(1, 301)) + LARGE_LENGTHS


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@pytest.mark.parametrize("char", CHARS, ids=repr)
def test_runs(char, name, encoding, reference):
    """char * n for n in 1..300 and up to 10,000: encode_ordinary alone and as "x" + run + "y"."""
    ours, theirs = encoding(name), reference(name)
    for n in LENGTHS:
        run = char * n
        assert ours.encode_ordinary(run) == theirs.encode_ordinary(run), (char, n)
        text = "x" + run + "y"
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), (char, n, "framed")


@pytest.mark.parametrize("name", LIGHT_ENCODINGS)
@pytest.mark.parametrize("char", CHARS, ids=repr)
def test_runs_light(char, name, encoding, reference):
    """The same runs, a spread of lengths, for o200k_harmony and gpt2."""
    ours, theirs = encoding(name), reference(name)
    for n in list(range(1, 40)) + LARGE_LENGTHS[::4]:
        assert ours.encode(char * n) == theirs.encode(char * n), (char, n)


#: Runs of one ASCII punctuation byte, which the per-piece matcher skips a compare per few
#: bytes (its copies), and what can stop or continue them: a contraction, letters of both
#: cases, digits, spaces, CR/LF, "/", other punctuation, wide characters, an invalid byte's
#: text (a lone surrogate is replaced, as tiktoken does).
PUNCTUATION = ["'", "-", "=", "*", "/", ".", "\"", "(", "!"]
PUNCTUATION_NEIGHBOURS = ["", "s", "S", "'s", "'LL", "x", "1", " ", "  ", "\n", "\r\n", "/", ".", "中", "é",
                          "😀", "\u0301", "\xa0", "\ud800"]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(st.sampled_from(PUNCTUATION_NEIGHBOURS), st.sampled_from(PUNCTUATION),
                                st.integers(1, 150)), min_size=1, max_size=6),
       tail=st.sampled_from(PUNCTUATION_NEIGHBOURS))
def test_runs_of_punctuation_between_neighbours(parts, tail, encoding, reference):
    """Runs of one punctuation character among neighbours: ids equal tiktoken's, every main encoding."""
    text = "".join(before + char * n for before, char, n in parts) + tail
    for name in MAIN_ENCODINGS:
        assert encoding(name).encode_ordinary(text) == reference(name).encode_ordinary(text), (name, text[:80])


#: What can follow or precede a long run of ASCII digits (cut into threes without the
#: pre-tokenizer with cl100k and o200k): other numbers (\p{Nd}, \p{No}, \p{Nl}), letters,
#: spaces, punctuation, a digit of another script inside the run, the end.
DIGIT_NEIGHBOURS = ["", "x", " ", "\n", ".", "٣", "²", "½", "Ⅻ", "١٢٣", "a1", "'s", "中", "😀"]


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_long_numbers(name, encoding, reference):
    """Runs of varied ASCII digits of every length around the fast path's threshold (24)
    and past a batch, between every pair of neighbours: ids equal tiktoken's."""
    ours, theirs = encoding(name), reference(name)
    digits = "31415926535897932384626433832795028841971693993751058209749445923078164062862089986"
    for n in list(range(20, 31)) + [47, 48, 49, 300, 1000, 5001]:
        run = (digits * (n // len(digits) + 1))[:n]
        for before in DIGIT_NEIGHBOURS:
            for after in DIGIT_NEIGHBOURS:
                text = before + run + after
                assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), (n, before, after)
        split = run[: n // 2] + "٣" + run[n // 2:]  # a digit of another script inside the run
        assert ours.encode_ordinary(split) == theirs.encode_ordinary(split), (n, "split")


def test_long_numbers_where_threes_are_no_tokens():
    """With cl100k's pattern and a vocabulary where only some threes of digits are tokens, a
    long run of digits is encoded as tiktoken encodes it (the threes that are no token go
    through BPE)."""
    import tiktoken

    import tiktoken_inc

    pattern = tiktoken_inc.get_encoding("cl100k_base")._pat_str
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b"12", b"123", b"000", b"00", b"0000", b"31", b"314"):
        ranks[token] = len(ranks)
    ours = tiktoken_inc.Encoding("digits", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("digits", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    for text in ["0" * 100, "123" * 40, "1234" * 30, "314" * 20 + "159" * 20, "0" * 30 + "1" * 30 + "123" * 10,
                 "9" * 60, "123" * 8 + "124" + "123" * 8]:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text


#: Long pieces that are periodic in stretches (the steps there are copied, and read back as
#: repeated blocks): a unit repeated, with bytes changed here and there, and a head and tail.
periodic_pieces = st.tuples(
    st.text(st.sampled_from("ab0 '中😀é"), min_size=1, max_size=7),
    st.integers(600, 4000),
    st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from("xy中")), max_size=3),
    st.text(st.sampled_from("ab c"), max_size=5),
)


def periodic_piece(case) -> bytes:
    """The UTF-8 of a `periodic_pieces` case: `head`, then `unit` repeated to `length`
    characters with `changes` made."""
    unit, length, changes, head = case
    text = list((unit * (length // len(unit) + 1))[:length])
    for where, char in changes:
        text[where % length] = char
    return (head + "".join(text)).encode("utf-8")


@settings(max_examples=60, deadline=None)
@given(case=periodic_pieces)
def test_periodic_pieces_equal_the_linear_steps(case, native_vocab):
    """BPE of long pieces made of a repeated unit: the default steps (which copy repeats and
    read the copies back in blocks) equal the plain linear steps, with every vocabulary."""
    unit, length, changes, head = case
    piece = periodic_piece(case)
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        vocab = native_vocab(name)
        assert vocab.bpe(piece) == vocab.bpe(piece, method="linear"), (name, unit, length, changes, head)


@settings(max_examples=60, deadline=None)
@given(case=periodic_pieces, sizes=st.lists(st.integers(1, 700), min_size=1, max_size=4))
def test_periodic_pieces_fed_in_chunks_equal_the_linear_steps(case, sizes, native_vocab):
    """The same pieces, one piece each (no pre-split), fed to a stream in chunks whose sizes
    end the feeds at any phase of the period: a copy goes on across feeds, or stops inside
    one, and the automaton's state after it is the state at its phase (csrc/steps.c,
    state_after_copy).  Each feed's ids are a prefix of the plain linear steps' BPE of the
    piece, and all of them are it."""
    import tiktoken_inc

    unit, length, changes, head = case
    piece = periodic_piece(case)
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        want = native_vocab(name).bpe(piece, method="linear")
        encoder = tiktoken_inc.get_encoding(name, pretokenize=False).stream_encoder(disallowed_special=())
        ids, position, k = [], 0, 0
        while position < len(piece):
            size = sizes[k % len(sizes)]
            ids += encoder.feed(piece[position:position + size])
            assert ids == want[: len(ids)], (name, unit, length, changes, head, sizes, position)
            position, k = position + size, k + 1
        assert ids + encoder.finish() == want, (name, unit, length, changes, head, sizes)
