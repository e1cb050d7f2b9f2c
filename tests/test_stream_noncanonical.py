"""The C stream honours tiktoken's whole-piece shortcut for non-canonical tokens.

A non-canonical token (one plain BPE never builds, here b"abc" without b"ab" or b"bc") is
reachable only when a whole piece equals it.  The stream holds a piece until it is longer
than the longest such token, or final, so streamed ids equal one-shot ids for every
chunking, in regex and no-regex modes, and count_tokens agrees with encode.
"""
from __future__ import annotations

import random

import pytest

from tiktoken_inc import Encoding
from tiktoken_inc._native import NativeStream, NativeVocab, lib

RANKS = {bytes([i]): i for i in range(256)} | {b"abc": 256, b"xy": 257, b"xyz": 258, b"zz": 259, b"xyzzy": 260}


@pytest.mark.parametrize("pattern", [0, lib.TKI_PATTERN_R50K, lib.TKI_PATTERN_CL100K, lib.TKI_PATTERN_O200K])
def test_stream_equals_one_shot_with_non_canonical_tokens(pattern):
    vocab = NativeVocab(RANKS, {})
    assert vocab.info["noncanonical_count"] > 0 and vocab.incremental
    rnd = random.Random(pattern)
    for _ in range(1500):
        text = "".join(rnd.choice("abcxyz !'\n") for _ in range(rnd.randrange(1, 30))).encode()
        expected = vocab.encode_text(pattern, text)[0] if pattern else vocab.encode_pieces([text])
        stream, got, at = NativeStream(vocab, pattern), [], 0
        while at < len(text):
            step = rnd.choice([1, 2, 3, 5])
            got += stream.feed(text[at : at + step])
            at += step
        assert got + stream.finish() == expected, text


def test_count_tokens_uses_the_shortcut():
    enc = Encoding("noncanonical", pat_str=r"\S+|\s+", mergeable_ranks=RANKS, special_tokens={})
    for text in ["abc", "abc abc", "xyzzy", "xyzzyx", "a abc xyz"]:
        assert enc.count_tokens(text) == len(enc.encode(text)), text
    assert enc.encode("abc") == [256]
