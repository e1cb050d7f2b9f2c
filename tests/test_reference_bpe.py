"""Checks the oracle itself: reference_bpe agrees with tiktoken's own BPE (no C core needed).

The small-vocabulary tests trust `reference_bpe` as their oracle, so it is checked here
against tiktoken's Rust BPE (`Encoding._encode_single_piece`, which applies the whole-piece
shortcut) on hand-made vocabularies, including improper ones, and on the real rank files.
Also checks the offline tiktoken fixture and a few hand-computed classifications.
"""
from __future__ import annotations

import random

import pytest
import tiktoken

import reference_bpe as ref
from support import MAIN_ENCODINGS, RANK_FILES, reference_name

# Token lists (in rank order) over the alphabet "ab"; several are improper or non-canonical.
SMALL_TOKEN_LISTS = [
    ["aa"],
    ["aa", "aaa"],
    ["aaa", "aa"],
    ["ab", "ba", "aba", "bab"],
    ["ba", "ab", "abab", "bb"],
    ["abb", "ab", "bb"],  # abb ranked before ab: improper
    ["aab", "ab"],  # aab is canonical via a+ab; rank of aab < ab: improper
    ["abab"],  # non-canonical: no rule builds it
    ["bb", "aa", "ab", "ba", "aab", "abb", "bba", "baa"],
]


def _tiktoken_encoding(ranks: dict) -> tiktoken.Encoding:
    return tiktoken.Encoding("small", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})


@pytest.mark.parametrize("tokens", SMALL_TOKEN_LISTS, ids=lambda t: ",".join(t))
def test_reference_matches_tiktoken_on_small_vocabularies(tokens):
    """Every string up to length 8 over {a, b}: reference encode_piece == tiktoken's per-piece BPE."""
    ranks = ref.small_vocab(tokens)
    enc = _tiktoken_encoding(ranks)
    for s in ref.all_strings("ab", 8):
        piece = s.encode()
        assert ref.encode_piece(piece, ranks) == enc._encode_single_piece(piece), s
        assert ref.encode_pieces([piece], ranks) == enc.encode_ordinary(s), s


@pytest.mark.parametrize("name", RANK_FILES)
def test_reference_matches_tiktoken_on_real_vocabularies(name, reference, ranks_of):
    """Random byte strings and random token concatenations: reference bpe == tiktoken, per rank file."""
    ranks = ranks_of(name)
    enc = reference(name)
    rng = random.Random(1234)
    by_rank = {r: t for t, r in ranks.items()}
    ids = sorted(by_rank)
    samples = [b" @param", b"a" * 40, b" " * 40, b"hello world, this is a test!", "中文分词😀".encode()]
    for _ in range(150):
        samples.append(b"".join(by_rank[rng.choice(ids)] for _ in range(rng.randint(1, 6))))
        samples.append(bytes(rng.choice(b"ab \n'xyz\xe4\xb8\xad") for _ in range(rng.randint(1, 20))))
    for piece in samples:
        assert ref.encode_piece(piece, ranks) == enc._encode_single_piece(piece), piece
        if piece not in ranks:  # without the shortcut, the plain rule must give the same
            assert ref.bpe(piece, ranks) == enc._encode_single_piece(piece), piece


def test_merge_rule_regression_cases():
    """The hand-checked cases of docs/algorithm.md section 12, on the reference itself."""
    v = ref.small_vocab(["aa"])
    assert ref.bpe_parts(b"aaa", v) == [b"aa", b"a"]  # leftmost on ties
    v = ref.small_vocab(["aa", "aaa"])
    assert ref.bpe_parts(b"aaaa", v) == [b"aa", b"aa"]
    assert ref.bpe_parts(b"aaaaa", v) == [b"aa", b"aaa"]  # aa|aa|a, then aa+a (aa+aa is no token)
    v = ref.small_vocab(["aa", "aaaa"])
    assert ref.bpe_parts(b"aaaaaaa", v) == [b"aaaa", b"aa", b"a"]
    assert ref.prefix_last_tokens(b"aaaa", v) == [ord("a"), v[b"aa"], ord("a"), v[b"aaaa"]]


def test_classification():
    """Non-canonical and improper tokens are recognised as docs/algorithm.md section 2 defines
    them."""
    assert ref.classify(ref.small_vocab(["aa", "aaa", "ab"])) == (set(), set())
    assert ref.classify(ref.small_vocab(["abab"])) == ({b"abab"}, set())  # no rule builds it
    assert ref.classify(ref.small_vocab(["abc", "ab"])) == (set(), {b"abc"})  # ab (257) then abc (256)
    assert ref.classify(ref.small_vocab(["aab", "ab"])) == (set(), {b"aab"})
    # "aaa" is built from aa+a by its own rule, even though aa is ranked after it.
    assert ref.classify(ref.small_vocab(["aaa", "aa"])) == (set(), {b"aaa"})
    assert ref.is_proper(ref.small_vocab(["aa", "aaa"]))
    assert not ref.is_proper(ref.small_vocab(["aaa", "aa"]))


def test_split_ids_by_pieces():
    """The helper that cuts a per-piece encoding back into pieces."""
    lens = {1: 1, 2: 2, 3: 3}
    assert ref.split_ids_by_pieces([2, 1, 3, 1], [b"xyz", b"abcd"], lens.__getitem__) == [[2, 1], [3, 1]]
    with pytest.raises(AssertionError):
        ref.split_ids_by_pieces([2, 2], [b"xyz", b"a"], lens.__getitem__)


@pytest.mark.parametrize("name", MAIN_ENCODINGS + ["gpt2"])
def test_tiktoken_reference_loads_offline(name, reference):
    """The offline fixture serves every reference encoding from the bundled rank files."""
    enc = reference(name)
    assert enc.name == reference_name(name)
    assert enc.decode(enc.encode("hello world")) == "hello world"


def test_real_vocabularies_are_canonical_and_proper(ranks_of):
    """docs/algorithm.md section 2 on the smallest file: every token canonical and proper."""
    ranks = ranks_of("r50k_base")
    assert all(ranks[bytes([b])] < 256 for b in range(256))
    rng = random.Random(7)
    sample = dict(rng.sample(sorted(ranks.items()), 3000))
    for token in sample:
        if len(token) >= 2:
            parts, merges = ref.bpe_trace(token, ranks)
            assert parts == [token], token
            assert merges == sorted(merges), token
