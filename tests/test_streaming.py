"""Streaming encoder and decoder (tiktoken_inc/streaming.py) against one-shot encode/decode.

- hypothesis: the ids of random chunkings (str chunks, and UTF-8 bytes cut anywhere, inside
  multibyte characters and inside special tokens) equal `enc.encode(whole)` for the five main
  encodings, with and without pre-splitting, with specials allowed, disallowed (the same
  ValueError, raised by the feed that completes the token) or ordinary;
- long runs (whitespace, digits, CJK, emoji) and 32 KiB of each corpus in random chunk sizes;
- every cut inside `<|endoftext|>`, surrogate pairs cut between str chunks, invalid UTF-8,
  reuse after finish, the held (non-eager) modes: a custom pattern and a vocabulary with
  non-canonical tokens;
- bounded window: 2^16 spaces fed one byte at a time through the wrapper, and 2^18 / 2^20
  through the C stream directly: the pending window stays small and the work is linear
  (max pending: 276 bytes with cl100k's pre-split, 275 without; see the assertions' messages);
- the stream decoder: random splits of random id lists (emoji and CJK cut across byte-level
  tokens, invalid UTF-8) under every error handler equal `enc.decode`;
- the CLI's `encode --stream`: ids equal `encode`, and they arrive before the input ends.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
import tiktoken_inc.registry
from support import MAIN_ENCODINGS, OUTSIDE_TREE, RUN_PROBE_CHARACTERS, WINDOW_FRAGMENTS
from tiktoken_inc._native import NativeStream
from tiktoken_inc._tki import ffi, lib
from tiktoken_inc.streaming import InvalidUTF8Error

EOT = "<|endoftext|>"
ALPHABET = list(
    "aZéß'’ \t\r\n\u00a0\u3000中文字0123456789!?.<|>/sStTdDmMlLvVrReE"
) + ["😀", "👍🏽", EOT, "<|endoftext", "<|fim_prefix|>", "<|endofprompt|>", "'re", "'ll", "    ", "\n\n"]

texts = st.lists(st.sampled_from(ALPHABET), max_size=30).map("".join)
SPECIAL_CASES = [
    (frozenset(), ()),  # specials are ordinary text
    ("all", "all"),  # every special is a special token
    (frozenset({EOT}), ()),  # one allowed, the others ordinary
    (frozenset(), "all"),  # tiktoken's default: any special raises
]


def cut(data, points):
    """`data` cut at the (sorted, deduplicated) `points`."""
    bounds = [0] + sorted({p for p in points if 0 < p < len(data)}) + [len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def one_shot(enc, text, allowed, disallowed):
    try:
        return enc.encode(text, allowed_special=allowed, disallowed_special=disallowed)
    except ValueError as error:
        return error


def streamed(enc, chunks, allowed, disallowed):
    encoder = enc.stream_encoder(allowed_special=allowed, disallowed_special=disallowed)
    ids = []
    try:
        for chunk in chunks:
            ids += encoder.feed(chunk)
        return ids + encoder.finish()
    except ValueError as error:
        return error


#: The main encodings with their pattern's pre-split (as get_encoding gives them).
_PRESPLIT = {name: tiktoken_inc.get_encoding(name) for name in MAIN_ENCODINGS}


def same(got, want):
    if isinstance(want, Exception) or isinstance(got, Exception):
        return type(got) is type(want) and str(got) == str(want)
    return got == want


@pytest.fixture(scope="module", params=[True, False], ids=["regex", "no_regex"])
def encodings(request):
    return [tiktoken_inc.get_encoding(name, pretokenize=request.param) for name in MAIN_ENCODINGS]


@settings(max_examples=300, deadline=None)
@given(text=texts, points=st.lists(st.integers(0, 400), max_size=8), case=st.sampled_from(SPECIAL_CASES))
def test_random_chunks_equal_encode(encodings, text, points, case):
    """str chunks and byte chunks (cut anywhere, inside characters too) == encode(whole)."""
    allowed, disallowed = case
    data = text.encode()
    for enc in encodings:
        want = one_shot(enc, text, allowed, disallowed)
        as_text = streamed(enc, cut(text, points), allowed, disallowed)
        as_bytes = streamed(enc, cut(data, points), allowed, disallowed)
        assert same(as_text, want), (enc, text, points, as_text, want)
        assert same(as_bytes, want), (enc, data, points, as_bytes, want)


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_byte_at_a_time(encodings, text):
    """The finest chunking: one byte per feed."""
    data = text.encode()
    for enc in encodings:
        want = one_shot(enc, text, "all", "all")
        assert same(streamed(enc, [data[i:i + 1] for i in range(len(data))], "all", "all"), want), (enc, text)


def test_emission_waits_while_the_last_end_is_in_the_window(encodings):
    """docs/algorithm.md section 6: a token may still start at the last emitted end while that
    end lies in the window of candidate ends.  With cl100k_base, `"` then `"` then `"` is one
    token (`\"\"\"`): a stream that emitted `"` once it was the only path would be wrong."""
    for text in ['"""', '"""x', '""', '" @param', "aaa", "\n\n\n"]:
        data = text.encode()
        for enc in encodings:
            want = enc.encode_ordinary(text)
            assert streamed(enc, [data[i:i + 1] for i in range(len(data))], frozenset(), ()) == want, (enc, text)


runs = st.lists(
    st.tuples(st.sampled_from([" ", "\n", "a", "\t", "中", "'", "0", " a", "\r\n", "😀"]), st.integers(1, 700)),
    min_size=1, max_size=4,
).map(lambda parts: "".join(char * count for char, count in parts))


# Runs whose probes the stream answers once (csrc/stream.c, certain_length): a character of
# each class the built-in patterns tell apart (the probe characters among them), and what may
# follow a run: each of them, the contraction letters, and pairs after "'", " ", "\r", "\n".
RUN_CONTINUATIONS = [""] + RUN_PROBE_CHARACTERS + list("elvrdmSTELVRDM") + [
    first + second for first in ("'", " ", "\r", "\n") for second in RUN_PROBE_CHARACTERS
]
RUN_PROBE_MIN_CHARACTERS = 4  # stream.c
RUN_ENCODINGS = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


@pytest.mark.parametrize("name", RUN_ENCODINGS)
def test_run_probes_move_with_the_run(name):
    """A stream matches the probes once for an open piece that is one character repeated (at
    least RUN_PROBE_MIN_CHARACTERS times) and moves their answer on as the run grows.  That is
    exact if, wherever the run alone is one piece, the piece that `regex` matches (tiktoken's
    pattern) at the run's start under any continuation ends len(character) bytes further on for
    each character more.  (With one character it does not: " " then "a" is " a".)"""
    from tiktoken_inc._corebpe import compile_pattern

    pattern = compile_pattern(tiktoken_inc.get_encoding(name)._pat_str)
    lengths = list(range(RUN_PROBE_MIN_CHARACTERS, RUN_PROBE_MIN_CHARACTERS + 8)) + [100, 101]
    for char in RUN_PROBE_CHARACTERS:
        if any(pattern.match(char * k).end() != k for k in lengths):
            continue  # not one piece: the stream does not keep it open
        for continuation in RUN_CONTINUATIONS:
            past_run = set()
            for k in lengths:
                end = pattern.match(char * k + continuation).end()
                past_run.add(len((char * k + continuation)[:end].encode()) - k * len(char.encode()))
            assert len(past_run) == 1, (name, char, continuation, past_run)


@settings(max_examples=200, deadline=None)
@given(
    char=st.sampled_from(RUN_PROBE_CHARACTERS),
    count=st.integers(1, 600),
    before=st.sampled_from(["", " ", "x", "\n", "'", "\r\n", "中"]),
    after=st.lists(st.sampled_from(RUN_PROBE_CHARACTERS + ["'s", "'ll", "\r\n"]), max_size=3).map("".join),
    points=st.lists(st.integers(0, 2500), max_size=6),
)
def test_run_then_another_character_equals_tiktoken(reference, char, count, before, after, points):
    """A run of one character (every class), something before it and another character (or a
    contraction, "\r\n") after it, its UTF-8 cut anywhere: the stream's ids are tiktoken's
    (without the pre-split: the one-shot encoding's)."""
    text = before + char * count + after
    data = text.encode()
    for name in RUN_ENCODINGS:
        want = reference(name).encode_ordinary(text)
        assert want == tiktoken_inc.get_encoding(name).encode_ordinary(text)
        one_piece = tiktoken_inc.get_encoding(name, pretokenize=False)
        for enc, ids in ((tiktoken_inc.get_encoding(name), want), (one_piece, one_piece.encode_ordinary(text))):
            assert streamed(enc, cut(data, points), frozenset(), ()) == ids, (enc, text, points)


@pytest.mark.parametrize("name", RUN_ENCODINGS)
def test_run_then_another_character_at_every_cut(reference, name):
    """Runs of each character, then each character after them, cut at every byte and fed one
    byte at a time: the runs' probes answered once give tiktoken's ids at each boundary."""
    enc = tiktoken_inc.get_encoding(name)
    for char in RUN_PROBE_CHARACTERS:
        for after in ["", "a", " ", "\n", "'s", "!", "0", "\r\n", "\u4e2d", "\u00a0", char + "x"]:
            text = "x" + char * 9 + after
            data = text.encode()
            want = reference(name).encode_ordinary(text)
            for point in range(1, len(data)):
                assert streamed(enc, [data[:point], data[point:]], frozenset(), ()) == want, (text, point)
            assert streamed(enc, [data[i:i + 1] for i in range(len(data))], frozenset(), ()) == want, text


@pytest.mark.parametrize("name", RUN_ENCODINGS)
def test_long_runs_in_even_chunks_equal_tiktoken(reference, name):
    """Runs long enough to be copied (csrc/steps.c: their certain ends are walked once per
    phase of the period and moved on), fed in chunks of sizes that keep one phase or cycle
    through several, then another character: tiktoken's ids, and the window stays small."""
    enc = tiktoken_inc.get_encoding(name)
    for char in [" ", "a", "\n", "\u4e2d", "\U0001F600", "0", "\t", "'", "!", "\u00e9"]:
        for after in ["", "a", "!", "\n", " x"]:
            text = char * 3000 + after
            data = text.encode()
            want = reference(name).encode_ordinary(text)
            for size in (64, 128, 300, 1024, 4096):
                encoder = enc.stream_encoder(disallowed_special=())
                ids = []
                for i in range(0, len(data), size):
                    ids += encoder.feed(data[i:i + size])
                    assert ids == want[: len(ids)], (char, after, size, i)
                assert ids + encoder.finish() == want, (char, after, size)
                assert encoder.stats["max_pending_bytes"] <= 4096 + size, (char, size, encoder.stats)


@pytest.mark.parametrize("name", RUN_ENCODINGS)
def test_runs_held_in_part_equal_tiktoken(reference, name):
    """A long run is not held whole (csrc/stream.c, drop_run_head: the stream keeps its last
    bytes and counts the rest as the run's character): runs of characters of several
    classes and lengths, fed in chunks of sizes on both sides of the bytes it keeps (so that
    it drops some at every phase), then another character, a word, another run, a special
    token or nothing: each feed's ids are a prefix of tiktoken's, and all are tiktoken's."""
    enc = tiktoken_inc.get_encoding(name)
    for char in [" ", "a", "\n", "\t", "!", "'", "\u00e9", "\u4e2d", "\U0001F600"]:
        for after in ["", "b", " x y", "\n", "<|endoftext|>" + char * 700, "\u4e2da", char + "z", "0" * 700]:
            text = char * (4000 // len(char.encode())) + after
            data = text.encode()
            want = reference(name).encode(text, allowed_special="all")
            for size in (1, 5, 64, 255, 256, 257, 300, 511, 512, 513, 700, 1024, 2000):
                if size == 1 and name not in ("cl100k_base", "o200k_base"):
                    continue
                encoder = enc.stream_encoder(allowed_special="all")
                ids = []
                for i in range(0, len(data), size):
                    ids += encoder.feed(data[i:i + size])
                    assert ids == want[: len(ids)], (char, after, size, i)
                assert ids + encoder.finish() == want, (char, after, size)


@settings(max_examples=150, deadline=None)
@given(text=runs, sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5))
def test_runs_in_random_chunks(encodings, text, sizes):
    """Long runs (whitespace before a word, digits, CJK, emoji) in chunks of random sizes."""
    data = text.encode()
    points, position, k = [], 0, 0
    while position < len(data):
        position += sizes[k % len(sizes)]
        points.append(position)
        k += 1
    for enc in encodings:
        assert streamed(enc, cut(data, points), frozenset(), ()) == enc.encode_ordinary(text), (enc, sizes)


window_texts = st.lists(
    st.sampled_from([f for f in WINDOW_FRAGMENTS if f.isascii()] * 4 + [f for f in WINDOW_FRAGMENTS if not f.isascii()]),
    min_size=16, max_size=160,
).map("".join)


@settings(max_examples=250, deadline=None)
@given(text=window_texts, size=st.one_of(st.integers(1, 100), st.just(4096)), first=st.integers(0, 100))
def test_pending_text_split_by_windows(reference, text, size, first):
    """A stream's pending text is split by 64-byte windows where they lie inside it, and piece
    by piece near its end (csrc/encode.c, split_batch): chunks of 1..100 bytes or 4 KiB after a
    first chunk of 0..100, so that every feed ends at another place -- in a whitespace run,
    a contraction, next to a combining mark, a CJK character or a no-break space -- give the
    ids of tiktoken's encode(whole) with each pre-split encoding."""
    data = text.encode()
    chunks = cut(data, [first] + list(range(first + size, len(data), size)))
    for name in MAIN_ENCODINGS:
        want = reference(name).encode_ordinary(text)
        got = streamed(_PRESPLIT[name], chunks, frozenset(), ())
        assert got == want, (name, text, size, first)


#: Endings whose pieces more text changes: contractions (o200k joins them to the word before),
#: whitespace runs, digits, punctuation with newlines and slashes, and non-ASCII characters
#: that join or split ASCII pieces (a combining mark, a modifier letter, a no-break space).
TRICKY_ENDINGS = [
    " it's", "AB'S", " it'll x", " he'", " Don't", "  \t x", "   \n\n  y", "abc\u0301d", "ABC\u02b0DEF",
    "A\u01c5bc", "a\u00a0 b", "12345678", "x!!\n\ny", "a//\n/b", "word\u3000 \u4e2d", "\u00e9t\u00e9 'S",
]


@pytest.mark.parametrize("ending", TRICKY_ENDINGS)
def test_every_cut_in_a_tricky_ending(reference, ending):
    """Two feeds, cut at every byte of an ending whose pieces more text changes, after 64 to
    127 bytes of English (so that a window starts at every distance from the cut): a window
    that lies inside the first feed's text may reach up to the cut, none reaches past it."""
    filler = "The quick brown fox jumps over the lazy dog; it's 42 (or 7).\n" * 3
    for pad in range(64, 128):
        text = filler[:pad] + ending + " and more"
        data = text.encode()
        for name in MAIN_ENCODINGS:
            want = reference(name).encode_ordinary(text)
            for point in range(pad, pad + len(ending.encode()) + 2):
                got = streamed(_PRESPLIT[name], [data[:point], data[point:]], frozenset(), ())
                assert got == want, (name, text, point)


#: Words of scripts with case, marks and ideographs: the windows decide ASCII pieces only, so
#: the per-piece matcher takes these, and past the first piece of a feed's text the stream's
#: engine matches them without the scan memo, with the shortcuts of one-shot calls
#: (csrc/encode.c, split_batch), which must say when they read up to the end of the text.
WIDE_TEXTS = [
    "Привет МИРу's мир, ΑΒΓδε ΣΟΦΊΑ'S",
    "中文字，中文。東京都 では「テスト」",
    " ÉCOLEétés naïve'LL Straße's ǄǅǆX",
    "é\u0301\u0301e ʰʰa \u3000\u4e2d\u00a0x ДЖ'Sж",
]


@pytest.mark.parametrize("text", WIDE_TEXTS)
def test_every_cut_in_wide_words(reference, text):
    """Two feeds cut at every byte, and three (the first cut halfway): each feed's ids are a
    prefix of tiktoken's, and all of them are tiktoken's."""
    data = text.encode()
    for name in MAIN_ENCODINGS:
        want = reference(name).encode_ordinary(text)
        for point in range(1, len(data)):
            for chunks in ([data[:point], data[point:]], [data[:point // 2], data[point // 2:point], data[point:]]):
                encoder = _PRESPLIT[name].stream_encoder(disallowed_special=())
                ids = []
                for chunk in chunks:
                    ids += encoder.feed(chunk)
                    assert ids == want[: len(ids)], (name, text, point)
                assert ids + encoder.finish() == want, (name, text, point)


#: Feeds that end inside a word.  Most such open pieces are a prefix of a token, and the stream
#: holds them as they are (csrc/stream.c, is_token_prefix: none of their tokens can be certain
#: yet); the others (long or rare words, runs, marks) take the probes and the steps.
HELD_ENDINGS = [" wor", " world", "Hello", " unbelievabl", " xqzjv", " Zzyzx's", "中文字", " 12345",
                "      ", ".\n\n", " пр", "😀😀", "e\u0301\u0301", " Straße", "ABCdef"]


@pytest.mark.parametrize("ending", HELD_ENDINGS)
def test_feeds_ending_inside_a_word(reference, ending):
    """Two feeds cut at every byte of a word after English, with and without text after it:
    the first feed's ids are a prefix of tiktoken's, and all of them are tiktoken's."""
    filler = "The quick brown fox jumps over the lazy dog; it's 42.\n"
    for after in ("", " and more", "'s x", "!"):
        text = filler + ending + after
        data = text.encode()
        for name in MAIN_ENCODINGS:
            want = reference(name).encode_ordinary(text)
            for point in range(len(filler) - 1, len(data) + 1):
                encoder = _PRESPLIT[name].stream_encoder(disallowed_special=())
                first = encoder.feed(data[:point])
                assert first == want[: len(first)], (name, text, point)
                assert first + encoder.feed(data[point:]) + encoder.finish() == want, (name, text, point)


def test_corpus_slices(corpora):
    """32 KiB of each corpus, fed in chunks of 1..4096 bytes (a fixed pseudo-random sequence)."""
    import random

    rng = random.Random(2024)
    for path in sorted(corpora.glob("*.txt")):
        if path.name == "MANIFEST.txt":
            continue
        text = path.read_bytes()[: 1 << 15].decode("utf-8", errors="ignore")
        data = text.encode()
        points = list(itertools.accumulate(rng.randint(1, 4096) for _ in range(len(data))))
        for name in MAIN_ENCODINGS:
            for pretokenize in (True, False):
                enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
                want = enc.encode(text, disallowed_special=())
                assert streamed(enc, cut(data, points), frozenset(), ()) == want, (path.name, enc)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@pytest.mark.parametrize("pretokenize", [True, False])
def test_every_cut_inside_endoftext(name, pretokenize):
    """"a <|endoftext|> b" cut at every pair of positions: allowed, ordinary, disallowed."""
    enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
    text = f"x {EOT}{EOT} y {EOT[:-1]}"
    data = text.encode()
    for allowed, disallowed in SPECIAL_CASES:
        want = one_shot(enc, text, allowed, disallowed)
        for i in range(len(data)):
            for j in range(i, len(data), 3):
                assert same(streamed(enc, cut(data, [i, j]), allowed, disallowed), want), (i, j, allowed)


def test_allowed_special_emitted_at_once():
    """An allowed special's id comes out from the feed that completes it."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder(allowed_special={EOT})
    assert encoder.feed("hello wor") == [15339]
    assert encoder.feed("ld<|endof") == []  # " world" could still grow: the special is not certain
    assert encoder.feed("text|>") == [1917, 100257]
    assert encoder.finish() == []


def test_disallowed_special_raises_where_it_completes():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder()
    encoder.feed("some text <|endof")
    with pytest.raises(ValueError) as raised:
        encoder.feed("text|> more")
    with pytest.raises(ValueError) as expected:
        enc.encode("some text <|endoftext|> more")
    assert str(raised.value) == str(expected.value)
    with pytest.raises(ValueError, match="failed earlier"):
        encoder.feed("again")


def test_surrogates_across_str_chunks():
    """A surrogate pair cut between two str chunks pairs up; lone ones become U+FFFD."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    for text in ["a\ud83d\ude00b", "a\ud83d", "\ude00x", "a\ud800b\ud83d\ude00"]:
        want = enc.encode(text)
        for i in range(len(text) + 1):
            assert streamed(enc, [text[:i], text[i:]], frozenset(), "all") == want, (text, i)
    encoder = enc.stream_encoder()
    assert encoder.feed("x\ud83d") + encoder.feed(b"y") + encoder.finish() == enc.encode("x\ufffdy")


def test_invalid_utf8_is_an_error():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder()
    encoder.feed(b"hello ")
    with pytest.raises(InvalidUTF8Error) as raised:
        encoder.feed(b"w\xffrld")
    assert (raised.value.offset, raised.value.byte) == (7, 0xFF)
    encoder = enc.stream_encoder()
    encoder.feed(b"ab\xe4\xb8")  # a character cut at the end of the input
    with pytest.raises(InvalidUTF8Error, match=r"byte 2 \(0xe4\): unexpected end of data"):
        encoder.finish()
    with pytest.raises(TypeError, match="str or bytes"):
        enc.stream_encoder().feed(12)


# Bytes that make UTF-8 hard to check: every kind of lead byte, the edges of the second
# byte's range after E0, ED, F0 and F4, continuation bytes, and ASCII.
_UTF8_PARTS = [b"a", b" ", b"\x80", b"\xbf", b"\xc1", b"\xc2", b"\xdf", b"\xe0", b"\xe1", b"\xec",
               b"\xed", b"\xee", b"\xef", b"\xf0", b"\xf1", b"\xf3", b"\xf4", b"\xf5", b"\xff",
               b"\x8f", b"\x90", b"\x9f", b"\xa0", "\u00e9".encode(), "\u4e2d".encode(),
               "\U0001f642".encode(), "\ud7ff".encode(), "\ue000".encode(), "\U0010ffff".encode()]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_UTF8_PARTS), max_size=40), st.lists(st.integers(0, 200), max_size=6))
def test_bytes_are_checked_as_python_decodes_them(parts, cuts):
    """Bytes fed in any chunks are accepted exactly when CPython decodes them, and a
    rejection names the byte where CPython's decoder stops (whole characters are checked
    together where four bytes remain: both ways are compared)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    data = b"".join(parts)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text, bad = None, error.start
    bounds = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    encoder = enc.stream_encoder(disallowed_special=())
    try:
        ids = [token for a, b in zip(bounds, bounds[1:]) for token in encoder.feed(data[a:b])]
        ids += encoder.finish()
    except InvalidUTF8Error as error:
        assert text is None, data
        assert error.offset == bad, (data, bounds)
    else:
        assert text is not None, data
        assert ids == enc.encode_ordinary(text)


def test_every_lead_and_second_byte_is_checked_as_python_decodes_them():
    """Every lead byte with every second byte, then continuations or not, with text after
    (where whole characters are checked together) and at the end, fed at once and cut after
    the lead: accepted exactly when CPython decodes it, rejected at CPython's byte."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    for lead in range(0x80, 0x100):
        for second in range(0x100):
            for tail in (b"\x80\x80abcd", b"\xbfabcd", b"abcd", b""):
                data = bytes([lead, second]) + tail
                try:
                    data.decode("utf-8")
                    bad = None
                except UnicodeDecodeError as error:
                    bad = error.start
                for cut in (len(data), 1):
                    encoder = enc.stream_encoder(disallowed_special=())
                    try:
                        encoder.feed(data[:cut])
                        encoder.feed(data[cut:])
                        encoder.finish()
                        got = None
                    except InvalidUTF8Error as error:
                        got = error.offset
                    assert got == bad, (data, cut)



def test_runs_of_one_length_are_checked_as_python_decodes_them():
    """Characters of one length are checked two or four at a compare where eight bytes
    remain: every lead after such characters (with the second byte at each edge of the
    ranges, then continuations and more of the same characters), accepted exactly when
    CPython decodes it, rejected at CPython's byte."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    seconds = (0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF)
    for before in ("\u00e9", "\u4e2d", "\ufeff", "\U0001f642"):
        run = before.encode() * 5
        for lead in range(0x80, 0x100):
            for second in seconds:
                for tail in (b"\x80\x80" + run, b"\x80" + run, run):
                    check_fed_whole(enc, run + bytes([lead, second]) + tail)


def test_mixed_scripts_are_checked_as_python_decodes_them():
    """Text of many scripts and ASCII is checked 32 bytes at a time (with AVX2; csrc/utf8.c):
    a lead byte of each kind with the second byte at each edge of the ranges, then
    continuations or not, at every place in the first 67 bytes of such text (both halves of
    a 32-byte block and its edges, cutting the characters around it), fed at once: accepted
    exactly when CPython decodes it, rejected at CPython's byte."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text = ("Ab \u00e9t\u00e9 \u4e2d\u6587 \U0001f642 \u0416\u0438\u0442\u044c x=1; "
            "\u00a0\u3000\ud7ff\ue000\U0010ffff\u0800 ok").encode() * 2
    leads = (0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF)
    seconds = (0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0)
    for place in range(67):
        for lead in leads:
            for second in seconds:
                for tail in (b"\x80\x80", b""):
                    check_fed_whole(enc, text[:place] + bytes([lead, second]) + tail + text[place:])


def check_fed_whole(enc, data: bytes) -> None:
    """`data` fed to a stream at once: rejected exactly where CPython's decoder rejects it
    (InvalidUTF8Error's offset), accepted when CPython decodes it."""
    try:
        data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as error:
        bad = error.start
    encoder = enc.stream_encoder(disallowed_special=())
    try:
        encoder.feed(data)
        encoder.finish()
        got = None
    except InvalidUTF8Error as error:
        got = error.offset
    assert got == bad, data


def check_fed_in_two(enc, data: bytes, cuts) -> None:
    """`data` fed to a stream in two feeds, cut at each of `cuts`: rejected exactly where
    CPython's decoder rejects it (InvalidUTF8Error's offset), and what is accepted gives
    encode_ordinary's ids."""
    try:
        text, bad = data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        text, bad = None, error.start
    for cut in cuts:
        encoder = enc.stream_encoder(disallowed_special=())
        try:
            ids = encoder.feed(data[:cut]) + encoder.feed(data[cut:]) + encoder.finish()
            got = None
        except InvalidUTF8Error as error:
            got = error.offset
        assert got == bad, (data, cut)
        if text is not None:
            assert ids == enc.encode_ordinary(text), (data, cut)


def test_long_runs_of_one_character_are_checked_as_python_decodes_them():
    """A run of one character is checked as copies of its first (32 and 8 bytes at a
    compare): every byte of a run of 2-, 3- and 4-byte characters (and an ASCII one) changed
    to each value that breaks or keeps UTF-8 at each place, fed whole and cut before,
    inside and after the change: accepted exactly when CPython decodes it, rejected at
    CPython's byte, and the ids of what is accepted are tiktoken's."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    for character in ("\u00e9", "\u4e2d", "\U0001f642", " "):
        run = character.encode() * (90 // len(character.encode()))
        for place in range(len(run)):
            for value in (0x20, 0x80, 0xBF, 0xC3, 0xE4, 0xF0, 0xFF, run[place] ^ 1):
                data = run[:place] + bytes([value]) + run[place + 1:] + b"ok"
                check_fed_in_two(enc, data, (len(data), max(0, place - 1), place, place + 1, len(data) - 3))


def test_long_runs_are_checked_at_every_place_of_the_wide_compares():
    """ASCII and runs of one character are checked 64 bytes at a compare where SSE2 is there
    (csrc/utf8.c, tki_copies_end), then 32 and 8: runs of 300 bytes with one byte changed at
    each place (so in each lane of several 64-byte compares, and in the narrower ones after
    them), fed whole and cut at the change: accepted exactly when CPython decodes it,
    rejected at CPython's byte, and the ids of what is accepted are tiktoken's."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    for character in (" ", "\n", "\u00e9", "\u4e2d", "\U0001f642"):
        run = character.encode() * (300 // len(character.encode()))
        for place in range(len(run)):
            for value in (0x80, 0xFF, run[place] ^ 1):
                data = run[:place] + bytes([value]) + run[place + 1:]
                check_fed_in_two(enc, data, (len(data), place))


def test_reuse_after_finish_and_stats():
    enc = tiktoken_inc.get_encoding("o200k_base")
    encoder = enc.stream_encoder()
    for text in ["first text", "second, longer text!"]:
        assert encoder.feed(text) + encoder.finish() == enc.encode(text)
    stats = encoder.stats
    assert stats["bytes_fed"] == len("first text") + len("second, longer text!")
    assert stats["tokens_emitted"] == len(enc.encode("first text")) + len(enc.encode("second, longer text!"))
    assert stats["pending_bytes"] == 0 and encoder.eager


_HELD_MEMORY_CHILD = """
import resource, sys
import tiktoken_inc

pretokenize, special = sys.argv[1] == "regex", sys.argv[2]
enc = tiktoken_inc.get_encoding("cl100k_base", pretokenize=pretokenize)
options = {"none": {"disallowed_special": ()}, "allowed": {"allowed_special": "all"},
           "refused": {}}[special]
chunk = (b"Streams hold a window, not what they were fed. " * 1366)[:65536]
encoder = enc.stream_encoder(**options)
for _ in range(16):
    encoder.feed(chunk)  # warm: buffers at their working size
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(1024):  # 64 MiB
    encoder.feed(chunk)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024, encoder.stats["max_pending_bytes"])
"""


@pytest.mark.parametrize("special", ["none", "allowed", "refused"])
@pytest.mark.parametrize("mode", ["regex", "one-piece"])
def test_stream_memory_does_not_grow_with_what_was_fed(mode, special):
    """64 MiB fed in 64 KiB chunks: the peak RSS grows by far less than what was fed, with or
    without special-token matching (a stream without refused strings once kept all it was fed)."""
    done = subprocess.run([sys.executable, "-c", _HELD_MEMORY_CHILD, mode, special], capture_output=True,
                          text=True, timeout=300, cwd=OUTSIDE_TREE)
    assert done.returncode == 0, done.stderr[-2000:]
    grown_mib, window = map(int, done.stdout.split())
    assert window < 4096
    assert grown_mib < 8, f"peak RSS grew by {grown_mib} MiB while 64 MiB were fed"


def test_held_modes_are_exact():
    """A custom pattern (compiled: eager; or split by `regex`: held per stretch) and a
    vocabulary with a non-canonical token (tiktoken's whole-piece shortcut, eager: a piece is
    held only while it may still be such a token) stream exactly."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc d": 257, b"xyz": 258}  # xyz, abc d: non-canonical
    specials = {EOT: 259}
    cases = [
        (tiktoken_inc.Encoding("custom", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens=specials), True),
        # a look-behind: split by `regex`, each stretch held until it ends
        (tiktoken_inc.Encoding("held", pat_str=r"(?<=x)y|\S+|\s+", mergeable_ranks=ranks, special_tokens=specials),
         False),
        (tiktoken_inc.Encoding("canon", pat_str=tiktoken_inc.registry.CL100K_PAT_STR, mergeable_ranks=ranks,
                               special_tokens=specials), True),
        (tiktoken_inc.Encoding("one", pat_str=None, mergeable_ranks=ranks, special_tokens=specials), True),
    ]
    for enc, eager in cases:
        assert enc.stream_encoder().eager is eager
        for text in ["xyz", "abc d", "xyz xyz", "abab abc d<|endoftext|>xyz", "xy", "abc dx", "ab" * 20]:
            want = enc.encode(text, allowed_special="all")
            data = text.encode()
            for i in range(len(data) + 1):
                assert streamed(enc, [data[:i], data[i:]], "all", "all") == want, (enc.name, text, i)


def test_wrapper_window_on_spaces():
    """2^16 spaces, one byte per feed, through StreamEncoder: the window stays small."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder(allowed_special="all")
    ids = []
    for _ in range(1 << 16):
        ids += encoder.feed(b" ")
    ids += encoder.finish()
    assert ids == enc.encode(" " * (1 << 16))
    assert encoder.stats["max_pending_bytes"] <= 4096, encoder.stats  # measured: 276


def _spaces_one_byte_at_a_time(vocab, pattern: int, n: int) -> tuple[float, dict]:
    """Feeds n spaces to a C stream one byte per call; (seconds, the stream's stats)."""
    stream = NativeStream(vocab, pattern)
    feed, space = stream.feed, b" "
    failed = False
    start = time.perf_counter()
    for _ in range(n):
        failed |= feed(space) is None
    elapsed = time.perf_counter() - start
    assert not failed
    return elapsed, stream.stats()


@pytest.mark.parametrize("pattern", [lib.TKI_PATTERN_CL100K, 0], ids=["cl100k_regex", "no_regex"])
def test_c_stream_window_and_linear_work(pattern):
    """2^18 and 2^20 spaces, one byte per feed: the pending window stays bounded (measured:
    276 bytes with the pre-split, 275 without; asserted <= 4096) and the work is linear
    (tokens emitted grow 4x; time grows at most 8x for 4x the input)."""
    vocab = tiktoken_inc.get_encoding("cl100k_base")._core_bpe._vocab
    small_time, small = min((_spaces_one_byte_at_a_time(vocab, pattern, 1 << 18) for _ in range(2)), key=lambda r: r[0])
    large_time, large = _spaces_one_byte_at_a_time(vocab, pattern, 1 << 20)
    print(f"\nmax pending bytes: {small['max_pending_bytes']} (2^18), {large['max_pending_bytes']} (2^20); "
          f"time {small_time:.2f} s -> {large_time:.2f} s")
    assert large["max_pending_bytes"] <= 4096, large
    assert large["max_pending_bytes"] == small["max_pending_bytes"]  # it does not grow with n
    assert large["pending_bytes"] <= 4096 and large["live_ends"] <= 4096
    emitted_small = small["tokens_emitted"] + small["pending_bytes"] / 128
    emitted_large = large["tokens_emitted"] + large["pending_bytes"] / 128
    assert 3.9 <= emitted_large / emitted_small <= 4.1
    assert large_time <= 8 * small_time, (small_time, large_time)


# ------------------------------------------------------------------ decoder

ERRORS = ["replace", "strict", "ignore", "backslashreplace", "surrogateescape"]


def decode_one_shot(enc, ids, errors):
    try:
        return enc.decode(ids, errors=errors)
    except UnicodeDecodeError:
        return UnicodeDecodeError


def decode_streamed(enc, parts, errors):
    decoder = enc.stream_decoder(errors=errors)
    text = ""
    try:
        for part in parts:
            text += decoder.feed(part)
            assert decoder.pending_bytes <= 3
        return text + decoder.finish()
    except UnicodeDecodeError:
        return UnicodeDecodeError


@pytest.fixture(scope="module")
def byte_level_ids():
    """{name: ids of single bytes >= 0x80} (the tokens that cut characters)."""
    out = {}
    for name in MAIN_ENCODINGS:
        enc = tiktoken_inc.get_encoding(name)
        out[name] = [enc.encode_single_token(bytes([b])) for b in range(0x80, 0x100)]
    return out


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(["😀", "👍🏽", "中文", "字", "é", "a", " ", EOT, "\u3000"]), max_size=12).map("".join),
    noise=st.lists(st.integers(0, 127), max_size=4),
    points=st.lists(st.integers(0, 60), max_size=6),
    errors=st.sampled_from(ERRORS),
)
def test_stream_decode_equals_decode(byte_level_ids, text, noise, points, errors):
    """Ids of emoji/CJK text, with random single-byte tokens mixed in (invalid UTF-8), split
    at random points: the streamed text equals decode(all ids, errors)."""
    for name in MAIN_ENCODINGS:
        enc = tiktoken_inc.get_encoding(name)
        ids = enc.encode(text, allowed_special="all")
        ids = ids + [byte_level_ids[name][k] for k in noise] + ids[: len(ids) // 2]
        want = decode_one_shot(enc, ids, errors)
        got = decode_streamed(enc, cut(ids, points), errors)
        assert got == want, (name, ids, points, errors)


def test_stream_decode_one_id_at_a_time():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    ids = enc.encode("中文 😀 👍🏽 é<|endoftext|>", allowed_special="all")
    decoder = enc.stream_decoder()
    pieces = [decoder.feed(token) for token in ids] + [decoder.finish()]
    assert "".join(pieces) == enc.decode(ids)
    assert all("\ufffd" not in piece for piece in pieces)  # never half a character
    with pytest.raises(KeyError):
        decoder.feed([2**31])
    with pytest.raises(LookupError):
        enc.stream_decoder(errors="no-such-handler")


# ------------------------------------------------------------------ CLI


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tiktoken_inc", *args]


def test_cli_stream_equals_encode(tmp_path):
    text = "Hello, world! 你好 😀  tabs\tand\nnewlines <|endoftext|> don't " * 50
    for flags, allowed, pretokenize in [([], (), True), (["--allow-special"], "all", True), (["--no-pretokenize"], (), False)]:
        result = subprocess.run(
            _cli("encode", "--stream", "--encoding", "o200k_base", *flags), input=text.encode(),
            capture_output=True, cwd=tmp_path, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        enc = tiktoken_inc.get_encoding("o200k_base", pretokenize=pretokenize)
        want = enc.encode(text, allowed_special=allowed or frozenset(), disallowed_special=())
        assert list(map(int, result.stdout.split())) == want, flags


def test_cli_stream_writes_ids_before_the_input_ends(tmp_path):
    process = subprocess.Popen(
        _cli("encode", "--stream", "--encoding", "cl100k_base"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=dict(os.environ),
    )
    try:
        process.stdin.write(b"hello world, and")
        process.stdin.flush()
        assert process.stdout.readline() == b"15339\n"  # "hello" is final: it arrives now
        process.stdin.write(b" more\n")
        process.stdin.close()
        rest = process.stdout.read().split()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    assert [15339] + list(map(int, rest)) == tiktoken_inc.get_encoding("cl100k_base").encode("hello world, and more\n")
