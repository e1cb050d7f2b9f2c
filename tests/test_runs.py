"""Runs of one character, the classic worst case of BPE, against tiktoken for every encoding.

Characters: "a", " ", "\\n", "0", "'", "中", "😀", "\\t".  Lengths: every length 1..300 and a
spread of larger lengths up to 10,000.  Each run is encoded alone and between two letters
(so whitespace runs meet the `\\s+(?!\\S)` rules); ids must equal tiktoken's.
"""
from __future__ import annotations

import pytest

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
