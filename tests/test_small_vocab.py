"""Small hand-made vocabularies against the plain-Python oracle, exhaustively.

Alphabets of 1-3 letters; token sets over them in every rank order (every permutation);
inputs are every string over the alphabet up to a length (8 for two letters).  For each
vocabulary the core (`NativeVocab`) must give exactly the oracle's ids:
- `encode_pieces(..., shortcut=False)` (plain BPE) and `shortcut=True`, with every method;
- when the core uses the incremental step, `prefix_last_tokens` (centroid and linear) for
  every prefix;
- the `incremental` flag: True for every vocabulary (all have every byte): an improper
  one (docs/algorithm.md section 2) gets new rule priorities (csrc/properize.c), with the tokens
  they cannot cover watched (`watched_tokens`, equal to reference_bpe.watched_tokens) and
  the pieces holding one stepped exactly; results are exact either way.
Also the `Encoding` layer with a custom pattern on small vocabularies (against both the
oracle and tiktoken), and the errors for unusable vocabularies (ValueError, never a crash).
"""
from __future__ import annotations

import itertools
import random

import pytest
import tiktoken
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

import reference_bpe as ref
import tiktoken_inc
from tiktoken_inc._native import NativeVocab

METHODS = ("auto", "linear", "heap")


def _describe(ranks: dict) -> str:
    multi = sorted((r, t) for t, r in ranks.items() if len(t) > 1)
    return "vocab " + " < ".join(t.decode("latin-1") for _, t in multi)


def check_vocabulary(ranks: dict, inputs: list[str], prefix_inputs: list[str]) -> NativeVocab:
    """Asserts the core equals the oracle on `inputs` (every method, with and without the
    shortcut) and, for an incremental vocabulary, on every prefix of `prefix_inputs`."""
    vocab = NativeVocab(ranks, {})
    what = _describe(ranks)
    noncanonical, improper = ref.classify(ranks)
    assert vocab.incremental, f"{what}: incremental=False (improper: {sorted(improper)})"
    assert vocab.info["improper_count"] == len(improper), what
    assert vocab.info["noncanonical_count"] == len(noncanonical), what
    assert vocab.info["properization_rejects"] == 0, what
    assert vocab.info["watched_tokens"] == len(ref.watched_tokens(ranks)), what

    length = {r: len(t) for t, r in ranks.items()}.__getitem__
    pieces = [s.encode() for s in inputs]
    plain = {p: ref.bpe(p, ranks) for p in pieces}
    for shortcut in (False, True):
        want = [[ranks[p]] if shortcut and p in ranks else plain[p] for p in pieces]
        for method in METHODS:
            got = ref.split_ids_by_pieces(vocab.encode_pieces(pieces, shortcut=shortcut, method=method), pieces, length)
            for piece, w, g in zip(pieces, want, got):
                assert g == w, f"{what}, {piece!r}, shortcut={shortcut}, method={method}: got {g}, want {w}"

    if vocab.incremental:
        for s in prefix_inputs:
            data = s.encode()
            want = [(plain.get(data[:i]) or ref.bpe(data[:i], ranks))[-1] for i in range(1, len(data) + 1)]
            for method in ("auto", "linear"):
                got = vocab.prefix_last_tokens(data, method=method)
                assert got == want, f"{what}, prefix_last_tokens({data!r}, method={method}): got {got}, want {want}"
    return vocab


# --------------------------------------------------------------------------- one letter
ONE_LETTER_TOKENS = ["aa", "aaa", "aaaa", "aaaaa"]


def _subsets_in_every_order(tokens):
    for k in range(1, len(tokens) + 1):
        for subset in itertools.combinations(tokens, k):
            yield from itertools.permutations(subset)


@pytest.mark.parametrize("order", list(_subsets_in_every_order(ONE_LETTER_TOKENS)), ids="<".join)
def test_runs_of_one_letter_every_subset_every_order(order):
    """a, aa, ..., aaaaa: every subset in every rank order, on a^1..a^24 and all their prefixes."""
    inputs = ["a" * n for n in range(1, 25)]
    check_vocabulary(ref.small_vocab(order), inputs, [inputs[-1]])


# --------------------------------------------------------------------------- two letters
TWO_LETTER_SETS = [
    ["ab", "ba", "aba", "bab"],
    ["aa", "ab", "aab", "aaab"],
    ["ab", "abab", "ba", "bb"],
    ["aa", "bb", "ab", "aabb"],
    ["ab", "bb", "abb", "abbb"],
    ["aa", "aaa", "ab", "aab"],
    ["ba", "aa", "baa", "aba"],
    ["ab", "ba", "abba", "baab"],
]


def _random_sets(seed: int, count: int, alphabet: str, lengths: range, size: int) -> list[list[str]]:
    rng = random.Random(seed)
    pool = [s for n in lengths for s in ref.all_strings(alphabet, n, n)]
    return [rng.sample(pool, size) for _ in range(count)]


TWO_LETTER_SETS += _random_sets(seed=2, count=20, alphabet="ab", lengths=range(2, 5), size=4)
TWO_LETTER_INPUTS = list(ref.all_strings("ab", 8))
TWO_LETTER_PREFIX_INPUTS = list(ref.all_strings("ab", 8, 8))


@pytest.mark.parametrize("tokens", TWO_LETTER_SETS, ids=",".join)
def test_two_letters_every_rank_order(tokens):
    """Four tokens over {a, b} in all 24 rank orders; every string up to length 8."""
    for order in itertools.permutations(tokens):
        check_vocabulary(ref.small_vocab(order), TWO_LETTER_INPUTS, TWO_LETTER_PREFIX_INPUTS)


SHORT_TWO_LETTER_TOKENS = [s for n in (2, 3) for s in ref.all_strings("ab", n, n)]


@pytest.mark.parametrize("first", SHORT_TWO_LETTER_TOKENS)
def test_two_letters_every_three_token_set_every_order(first):
    """Exhaustive: every set of three tokens of length 2-3 over {a, b}, in all 6 rank orders,
    on every string up to length 7 (parametrized by the set's first token)."""
    inputs = list(ref.all_strings("ab", 7))
    prefix_inputs = list(ref.all_strings("ab", 7, 7))
    rest = SHORT_TWO_LETTER_TOKENS[SHORT_TWO_LETTER_TOKENS.index(first) + 1 :]
    for pair in itertools.combinations(rest, 2):
        for order in itertools.permutations((first, *pair)):
            check_vocabulary(ref.small_vocab(order), inputs, prefix_inputs)


@pytest.mark.parametrize("seed", range(4))
def test_two_letters_five_and_six_tokens(seed):
    """Larger token sets over {a, b} (lengths 2-4), a sample of their rank orders."""
    rng = random.Random(100 + seed)
    tokens = _random_sets(seed=200 + seed, count=1, alphabet="ab", lengths=range(2, 5), size=5 + seed % 2)[0]
    # mostly canonical sets: add the pairs their tokens need
    tokens = list(dict.fromkeys(["ab", "ba", "aa", "bb"][: 2 + seed] + tokens))
    for _ in range(20):
        order = tokens[:]
        rng.shuffle(order)
        check_vocabulary(ref.small_vocab(order), TWO_LETTER_INPUTS, TWO_LETTER_PREFIX_INPUTS)


def test_properization_is_exercised_every_way():
    """The permutation families hold proper vocabularies, improper ones that are wholly
    properized, and improper ones with watched tokens."""
    seen = set()
    for order in itertools.permutations(TWO_LETTER_SETS[0]):
        info = NativeVocab(ref.small_vocab(order), {}).info
        seen.add((info["improper_count"] > 0, info["watched_tokens"] > 0))
    assert seen == {(False, False), (True, False), (True, True)}


# --------------------------------------------------------------------------- three letters
THREE_LETTER_SETS = [
    ["ab", "bc", "ca", "abc", "bca", "cab"],
    ["ab", "bc", "abc", "cab", "ca"],
    ["aa", "ab", "bc", "aab", "abc", "aabc"],
]


@pytest.mark.parametrize("tokens", THREE_LETTER_SETS, ids=",".join)
def test_three_letters_sampled_rank_orders(tokens):
    """Token sets over {a, b, c}: the listed order, its reverse and 8 random orders; strings up to 7."""
    inputs = list(ref.all_strings("abc", 7))
    prefix_inputs = list(ref.all_strings("abc", 7, 7))
    rng = random.Random(3)
    orders = [tokens, tokens[::-1]] + [rng.sample(tokens, len(tokens)) for _ in range(8)]
    for order in orders:
        check_vocabulary(ref.small_vocab(order), inputs, prefix_inputs)


# --------------------------------------------------------------------------- rank layouts
LAYOUT_TOKENS = ["ab", "ba", "aba", "bab", "bb"]


def _layout(kind: str) -> dict:
    if kind == "bytes-after-merges":  # bytes at 1000+b, merges at 0..4
        return ref.small_vocab(LAYOUT_TOKENS, first_rank=0, byte_rank_base=1000)
    ranks = {bytes([b]): b for b in range(256)}
    if kind == "holes":  # gaps between merge ranks, like p50k's missing 50256
        ranks.update({t.encode(): 300 + 7 * i for i, t in enumerate(LAYOUT_TOKENS)})
    elif kind == "scrambled-bytes":
        perm = list(range(256))
        random.Random(5).shuffle(perm)
        ranks = {bytes([b]): perm[b] for b in range(256)}
        ranks.update({t.encode(): 256 + i for i, t in enumerate(LAYOUT_TOKENS)})
    return ranks


@pytest.mark.parametrize("kind", ["bytes-after-merges", "holes", "scrambled-bytes"])
def test_rank_layouts(kind):
    """Byte ranks play no part in merging (docs/algorithm.md section 2: demand nothing of them), and
    rank holes are allowed: these proper vocabularies must stay incremental and exact."""
    check_vocabulary(_layout(kind), TWO_LETTER_INPUTS, TWO_LETTER_PREFIX_INPUTS)


def test_regression_vocabularies_are_incremental():
    """{a, aa} and {a, aa, aaa} are proper: the incremental step must be used (and be exact)."""
    v = check_vocabulary(ref.small_vocab(["aa"]), ["aaa"], ["aaaaaaaa"])
    assert v.incremental
    assert v.bpe(b"aaa") == [256, ord("a")]
    v = check_vocabulary(ref.small_vocab(["aa", "aaa"]), ["aaaa"], ["aaaaaaaaa"])
    assert v.incremental
    assert v.bpe(b"aaaa") == [256, 256]


def test_improper_vocabulary_is_properized():
    """abc ranked before ab: improper; ab gets the higher priority, nothing is watched, and
    every string and prefix is exact."""
    ranks = ref.small_vocab(["abc", "ab"])
    v = check_vocabulary(ranks, list(ref.all_strings("abc", 6)), list(ref.all_strings("abc", 6, 6)))
    assert v.incremental and v.info["moved_rules"] == 1 and v.info["watched_tokens"] == 0


# --------------------------------------------------------------------------- random vocabularies
@st.composite
def small_vocabularies(draw):
    pool = [s for n in range(2, 6) for s in ref.all_strings("abc", n, n)]
    tokens = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=10, unique=True))
    return ref.small_vocab(tokens)


@settings(max_examples=1000, deadline=None)
@given(ranks=small_vocabularies(), texts=st.lists(st.text("abc", min_size=1, max_size=30), min_size=1, max_size=8))
def test_random_small_vocabularies(ranks, texts):
    """Random token sets over {a, b, c} (lengths 2-5, random order) on random strings up to 30."""
    check_vocabulary(ranks, texts, texts)


# --------------------------------------------------------------------------- through Encoding
PATTERN = r"\S+|\s+"
ENCODING_TOKEN_LISTS = [
    ["ab", "ba", "aba", "bab", " a", " b"],  # canonical, proper
    ["abc", "ab", "bc"],  # improper
    ["abab", "bab"],  # non-canonical: only the whole-piece shortcut produces them
    ["aa", "aaa", "aaaa", "  ", "   "],
]


@pytest.mark.parametrize("tokens", ENCODING_TOKEN_LISTS, ids=",".join)
def test_encoding_with_custom_pattern(tokens):
    """tiktoken_inc.Encoding with pat_str \\S+|\\s+ on a small vocabulary == oracle == tiktoken."""
    ranks = ref.small_vocab(tokens)
    specials = {"<|end|>": 1000}
    ours = tiktoken_inc.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    theirs = tiktoken.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.incremental and NativeVocab(ranks, {}).incremental
    rng = random.Random(11)
    texts = list(ref.all_strings("ab ", 6)) + ["".join(rng.choice("abc \n") for _ in range(rng.randint(1, 60))) for _ in range(300)]
    for text in texts:
        want = ref.encode_with_pattern(text, ranks, PATTERN)
        assert theirs.encode_ordinary(text) == want, text  # the oracle agrees with tiktoken
        assert ours.encode_ordinary(text) == want, text
        assert ours.encode(text + "<|end|>" + text, allowed_special="all") == want + [1000] + want, text
        assert ours.decode(want) == text


# --------------------------------------------------------------------------- unusable vocabularies
def _without_byte(missing: int) -> dict:
    ranks = ref.small_vocab(["ab"])
    del ranks[bytes([missing])]
    return ranks


@pytest.mark.parametrize("missing", [0, ord("a"), 0x80, 255])
def test_missing_single_byte_builds_and_refuses_that_byte(missing):
    """A vocabulary lacking a single byte is built, as tiktoken builds it; a text that needs
    the byte raises ValueError when encoded (where tiktoken panics), other texts encode as
    tiktoken encodes them."""
    import tiktoken

    ranks = _without_byte(missing)
    ours = tiktoken_inc.Encoding("x", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("x", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    assert not ours.incremental
    text = "ab ba abab" if missing not in (ord("a"),) else "b bb"
    assert ours.encode(text) == theirs.encode(text)
    with pytest.raises(ValueError, match="cannot encode"):
        ours._encode_bytes(b"zz" + bytes([missing]) + b"zz")


def test_duplicate_ranks_are_a_value_error():
    """Two tokens with one rank, or a token and a special with one rank: ValueError naming the rank."""
    ranks = ref.small_vocab(["ab", "ba"])
    ranks[b"ba"] = ranks[b"ab"]
    for make in (
        lambda: NativeVocab(ranks, {}),
        lambda: tiktoken_inc.Encoding("x", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={}),
    ):
        with pytest.raises(ValueError) as info:
            make()
        assert "256" in str(info.value)
    with pytest.raises(ValueError):
        NativeVocab(ref.small_vocab([]), {"<|x|>": 300, "<|y|>": 300})
    with pytest.raises(ValueError):  # a byte sharing its rank with a byte
        NativeVocab({**ref.small_vocab([]), b"a": 0}, {})


def test_empty_token_is_built():
    """An empty mergeable token is built, as tiktoken builds it: it decodes to nothing and is
    its own encode_single_token; it is never merged into."""
    import tiktoken

    ranks = {**ref.small_vocab(["ab"]), b"": 500}
    ours = tiktoken_inc.Encoding("x", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("x", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    assert ours.encode("abab a") == theirs.encode("abab a")
    assert ours.encode_single_token(b"") == theirs.encode_single_token(b"") == 500
    assert ours.decode_bytes([500, 256]) == theirs.decode_bytes([500, 256]) == b"ab"


@pytest.mark.parametrize("rank", [-1, 2**32 - 1, 2**40, "7", 1.5])
def test_bad_rank_values_are_value_errors(rank):
    """Ranks must be integers in [0, 2**32 - 1)."""
    with pytest.raises(ValueError):
        NativeVocab({**ref.small_vocab([]), b"ab": rank}, {})


def test_token_length_limit():
    """The incremental algorithm's limit: 4096-byte tokens; a longer one makes the
    vocabulary use the heap BPE (tiktoken builds it too)."""
    ranks = {**ref.small_vocab([]), b"a" * 4096: 256}
    v = NativeVocab(ranks, {})
    assert v.incremental
    assert v.encode_pieces([b"a" * 4096]) == [256]
    assert v.bpe(b"a" * 10) == [ord("a")] * 10
    longer = NativeVocab({**ref.small_vocab([]), b"a" * 4097: 256}, {})
    assert not longer.incremental
    assert longer.encode_pieces([b"a" * 4097]) == [256]


def test_lookup_at_the_hash_slots_edges():
    """A slot holds a key's first 11 bytes and its length up to 255; longer keys and keys
    of 255 bytes or more are compared beyond it.  Tokens that share their first 8, 11 or
    254 bytes and differ after, of every length around those edges, are each found, and
    keys that differ from a token only past those edges (or only in length) are not."""
    rng = random.Random(7)
    word = bytes(rng.choice(b"abcdefgh") for _ in range(300))
    twins = [word[:edge] + bytes([word[edge] ^ 0x20]) + word[edge + 1:] for edge in (8, 9, 10, 11, 12, 254, 255)]
    ranks = ref.small_vocab([])
    for string in [word] + twins:
        for length in range(2, len(string) + 1):
            ranks.setdefault(string[:length], len(ranks))
    vocab = NativeVocab(ranks, {})
    for token, rank in ranks.items():
        assert vocab.rank(token) == rank, token
    for string in [word] + twins:
        for length in (9, 10, 11, 12, 13, 254, 255, 256, 257, 300):
            key = string[: length - 1] + b"z"  # differs from every token only in its last byte
            assert vocab.rank(key) is None, key
    for length in (301, 302, 400):  # longer than every token, the same first 300 bytes
        assert vocab.rank(word + b"a" * (length - 300)) is None
    assert vocab.encode_pieces([word, twins[3], word[:255], word[:12]]) == [ranks[word], ranks[twins[3]], ranks[word[:255]], ranks[word[:12]]]


def test_empty_vocabulary_and_empty_input():
    """No mergeable tokens at all: the tables build, every byte is refused when encoded
    (Encoding refuses such a vocabulary outright); empty inputs encode and decode to nothing."""
    with pytest.raises(ValueError, match="cannot encode"):
        NativeVocab({}, {}).encode_pieces([b"a"])
    v = NativeVocab(ref.small_vocab([]), {})
    assert v.encode_pieces([]) == []
    assert v.encode_pieces([b"", b""]) == []
    assert v.bpe(b"") == []
    assert v.prefix_last_tokens(b"") == []
    assert v.decode_bytes([]) == b""
    assert v.bpe(bytes(range(256))) == list(range(256))


# --------------------------------------------------------------------------- improper vocabularies
def test_siblings_that_take_a_second_seed_pair():
    """aa < baba < aba < babb < ba < ab: on "ababa" tiktoken merges the first ba, which aba
    takes at once, before the second ba exists: [aba, ba].  baba joins two grown ba pairs,
    so its level (ba's) has no priorities: aba and baba are watched, and every string is
    exact (an ordering of the siblings by rank gave [a, baba])."""
    ranks = ref.small_vocab(["aa", "baba", "aba", "babb", "ba", "ab"])
    v = check_vocabulary(ranks, list(ref.all_strings("ab", 12)), list(ref.all_strings("ab", 11, 11)))
    assert v.encode_pieces([b"ababa"], shortcut=False) == [ranks[b"aba"], ranks[b"ba"]]
    assert ref.watched_tokens(ranks) == {b"aba", b"baba"} and v.info["watched_tokens"] == 2


def test_vocabulary_that_cannot_be_properized():
    """a, aa, aaa with aaa ranked before aa: on "aaaa" tiktoken gives aaa|a, and every order
    of the rules aa|aa.  aaa is watched: a piece holding it takes the exact step, and stays
    exact, prefix by prefix, on runs of every length."""
    ranks = ref.small_vocab(["aaa", "aa"])
    runs = ["a" * n for n in range(1, 200)]
    v = check_vocabulary(ranks, runs, runs[-1:] + ["baaaab", "aaaabaaaaab"])
    assert v.incremental and v.info["watched_tokens"] == 1
    assert v.bpe(b"aaaa") == [256, ord("a")]
    long_run = b"a" * 100_000
    assert v.encode_pieces([long_run], shortcut=False) == v.encode_pieces([long_run], shortcut=False, method="heap")


IMPROPER_ORDER_TOKENS = [s for n in range(2, 6) for s in ref.all_strings("ab", n, n)]


@pytest.mark.parametrize("seed", range(8))
def test_random_rank_orders_over_two_letters(seed):
    """Random token sets over {a, b} of lengths 2-5 in random rank orders (half of them
    improper): every string up to length 10, every prefix of the longest."""
    rng = random.Random(900 + seed)
    strings = list(ref.all_strings("ab", 10))
    prefixes = list(ref.all_strings("ab", 10, 10))[::7]
    for _ in range(12):
        tokens = rng.sample(IMPROPER_ORDER_TOKENS, rng.randint(3, 10))
        tokens += [t for t in ("aa", "ab", "ba", "bb") if t not in tokens and rng.random() < 0.6]
        rng.shuffle(tokens)
        check_vocabulary(ref.small_vocab(tokens), strings, prefixes)


@pytest.mark.parametrize("tokens", [["aa", "baba", "aba", "babb", "ba", "ab"], ["aaa", "aa"], ["abc", "ab"],
                                    ["aab", "ab", "ba", "aaba", "aa"]], ids=",".join)
def test_streams_and_counts_with_watched_pieces(tokens):
    """Streams cut anywhere and count_tokens give one-shot encoding's ids, which
    are tiktoken's, on texts whose pieces hold watched and reordered tokens."""
    ranks = ref.small_vocab(tokens)
    ours = tiktoken_inc.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    rng = random.Random(17)
    texts = ["ababa aaaa " * 3, "a" * 3000 + " " + "ab" * 700, "aabaa" * 50]
    texts += ["".join(rng.choice("ab  ") for _ in range(rng.randint(1, 400))) for _ in range(40)]
    for text in texts:
        want = theirs.encode_ordinary(text)
        assert ours.encode_ordinary(text) == want, text
        assert ours.count_tokens(text) == len(want)
        for _ in range(3):
            cuts = sorted(rng.sample(range(len(text) + 1), min(4, len(text) + 1)))
            encoder = ours.stream_encoder()
            got = []
            for a, b in zip([0] + cuts, cuts + [len(text)]):
                got += encoder.feed(text[a:b])
            assert got + encoder.finish() == want, (text, cuts)


@st.composite
def improper_vocabularies_and_texts(draw):
    """An improper vocabulary over {a, b} (tokens of 2-5 letters, random rank order, runs of
    one letter likely) and texts over "ab " in which its tokens' letters recur."""
    pool = [s for n in range(2, 6) for s in ref.all_strings("ab", n, n)]
    tokens = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12, unique=True))
    # A token ranked before a part of it that merges first makes the vocabulary improper.
    whole = draw(st.sampled_from([s for s in pool if len(s) >= 3]))
    part = draw(st.sampled_from([whole[:2], whole[-2:]]))
    tokens = [t for t in tokens if t not in (whole, part)]
    at = draw(st.integers(0, len(tokens)))
    tokens[at:at] = [whole, *tokens[at:at + draw(st.integers(0, 3))], part]
    tokens = list(dict.fromkeys(tokens))
    ranks = ref.small_vocab(tokens)
    assume(ref.classify(ranks)[1])
    pieces = st.one_of(st.sampled_from(tokens), st.text("ab", min_size=1, max_size=9), st.just(" "))
    texts = draw(st.lists(st.lists(pieces, min_size=1, max_size=12).map("".join), min_size=1, max_size=4))
    return ranks, texts


@settings(max_examples=300, deadline=None)
@given(case=improper_vocabularies_and_texts(), cut_seed=st.integers(0, 2**32 - 1))
def test_random_improper_vocabularies_against_tiktoken(case, cut_seed):
    """Random improper vocabularies: encode, streams cut anywhere, count_tokens (with limits)
    and truncate equal tiktoken built from the same ranks and pattern."""
    ranks, texts = case
    specials = {"<|end|>": 1000}
    ours = tiktoken_inc.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    theirs = tiktoken.Encoding("small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.incremental
    event("watched tokens" if ours._core_bpe._vocab.info["watched_tokens"] else "wholly properized")
    rng = random.Random(cut_seed)
    for text in texts:
        want = theirs.encode_ordinary(text)
        assert ours.encode_ordinary(text) == want, text
        joined = text + "<|end|>" + text
        assert ours.encode(joined, allowed_special="all") == theirs.encode(joined, allowed_special="all")
        cuts = sorted(rng.sample(range(len(text) + 1), min(rng.randint(1, 6), len(text) + 1)))
        encoder = ours.stream_encoder()
        got = []
        for start, end in zip([0] + cuts, cuts + [len(text)]):
            got += encoder.feed(text[start:end])
        assert got + encoder.finish() == want, (text, cuts)
        assert ours.count_tokens(text) == len(want)
        for limit in {0, max(len(want) - 1, 0), len(want)}:
            assert ours.count_tokens(text, limit=limit) == (len(want) if len(want) <= limit else None)
        for n in {0, 1, len(want) // 2, len(want)}:
            tokens, prefix = ours.truncate(text, n)
            fits = max(k for k in range(min(n, len(want)) + 1)
                       if theirs.encode_ordinary(theirs.decode(want[:k])) == want[:k])
            assert (tokens, prefix) == (want[:fits], theirs.decode(want[:fits])), (text, n)
