"""Ranks far apart: memory in proportion to the number of tokens, ids exactly tiktoken's.

tiktoken takes any ranks below 2**32 - 1, however far apart ({b"ab": 10**9} beside the 256
bytes), and special token ids anywhere (above every rank, between ranks, on a rank).  The
C core renumbers such ranks densely inside, in their order (merge priority is rank order),
and gives the caller's ids back wherever ids go out or come in.  Checked here:
- the issue's example (one merge at 10**8, 10**9, 2**31 - 1, 2**32 - 2) builds small: the
  peak memory of a process that builds it does not grow with the largest rank;
- every API on such vocabularies against tiktoken itself: cl100k_base's ranks spread out
  (incremental, the C pre-splitter), small ones with a custom pattern (compiled), random
  sparse vocabularies (hypothesis), and improper ones (properized, one with a watched token);
- decoding an id that is no token (between the ranks, above them) fails as in tiktoken;
- an image of a sparse vocabulary is cached and mapped, and a damaged id table refused.
"""
from __future__ import annotations

import os
import itertools
import random
import subprocess
import sys
import textwrap

import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st

import reference_bpe as ref
from support import OUTSIDE_TREE
import tiktoken_inc
from tiktoken_inc.registry import CL100K_PAT_STR, R50K_PAT_STR, bundled_ranks

BYTES = {bytes([b]): b for b in range(256)}
SIMPLE_PATTERN = r"\S+|\s+"
HUGE_RANKS = [10**8, 10**9, 2**31 - 1, 2**32 - 2]

TEXTS = [
    "",
    "abab cab ab",
    "hello world, it's 2024: don't   stop\n\n\t 12345678901234 café 你好世界 😀😀",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "ab" * 300 + " " * 70 + "x",
    "The quick brown fox <|endoftext|> jumps over the lazy dog. <|fim_prefix|>def f():\n    return 1",
]


def both(ranks: dict[bytes, int], specials: dict[str, int], pat_str: str = CL100K_PAT_STR):
    """(ours, tiktoken's) Encoding of the same vocabulary."""
    kw = dict(name="sparse", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)
    return tiktoken_inc.Encoding(**kw), tiktoken.Encoding(**kw)


def outcome(call):
    """A call's result, or its exception's type and arguments."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - compared as the outcome
        return type(error), error.args


def spread(ranks: dict[bytes, int], step: int, base: int) -> dict[bytes, int]:
    """The same tokens in the same order, rank r (past the bytes) moved to base + r * step."""
    return {token: rank if rank < 256 else base + rank * step for token, rank in ranks.items()}


def assert_same(ours, theirs, texts: list[str]) -> None:
    """Every API of `ours` gives tiktoken's ids and bytes on `texts`; ours-only calls are
    checked against tiktoken's encode of the same text."""
    assert ours.n_vocab == theirs.n_vocab
    assert ours.max_token_value == theirs.max_token_value
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert ours.token_byte_values() == theirs.token_byte_values()
    assert outcome(lambda: ours.eot_token) == outcome(lambda: theirs.eot_token)
    for special in theirs.special_tokens_set:
        assert ours.encode_single_token(special) == theirs.encode_single_token(special)
    for text in texts:
        ordinary = theirs.encode_ordinary(text)
        full = theirs.encode(text, allowed_special="all")
        assert ours.encode_ordinary(text) == ordinary, text
        assert ours.encode(text, allowed_special="all") == full, text
        assert outcome(lambda: ours.encode(text)) == outcome(lambda: theirs.encode(text)), text
        assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=()), text
        assert ours.encode_to_numpy(text, allowed_special="all").tolist() == full, text
        stable, completions = theirs.encode_with_unstable(text, allowed_special="all")
        mine = ours.encode_with_unstable(text, allowed_special="all")
        assert mine[0] == stable and sorted(mine[1]) == sorted(completions), text
        data = text.encode()
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), text
        if data:  # (tiktoken panics on an empty piece)
            assert ours._encode_single_piece(data) == theirs._encode_single_piece(data), text
        # Decoding.
        assert ours.decode(full) == theirs.decode(full) == text
        assert ours.decode_bytes(full) == data
        assert ours.decode_tokens_bytes(full) == theirs.decode_tokens_bytes(full)
        assert ours.decode_with_offsets(full) == theirs.decode_with_offsets(full)
        for token in full:
            assert ours.decode_single_token_bytes(token) == theirs.decode_single_token_bytes(token)
            if token in ordinary:  # (a special token's id may also be a rank: ordinary ones only)
                assert ours.encode_single_token(theirs.decode_single_token_bytes(token)) == token
        # The stream, in chunks of every few characters, and the bounded calls.
        for size in (1, 3, 64):
            encoder = ours.stream_encoder(allowed_special="all")
            streamed = [i for start in range(0, len(text), size) for i in encoder.feed(text[start:start + size])]
            assert streamed + encoder.finish() == full, (text, size)
        decoder = ours.stream_decoder()
        assert "".join(decoder.feed([token]) for token in full) + decoder.finish() == text
        assert ours.count_tokens(text, allowed_special="all") == len(full)
        for cap in (0, 1, len(full) // 2, len(full)):
            tokens, prefix = ours.truncate(text, cap, allowed_special="all")
            assert len(tokens) <= cap and text.startswith(prefix)
            assert tokens == full[: len(tokens)] == theirs.encode(prefix, allowed_special="all"), (text, cap)
        kept, tail = ours.heal(ordinary)
        assert ordinary[: len(kept)] == kept and ours.decode(kept) + tail == text
    # Batches, lists and numpy.
    assert ours.encode_batch(texts, allowed_special="all") == theirs.encode_batch(texts, allowed_special="all")
    assert ours.encode_ordinary_batch(texts, num_threads=2) == theirs.encode_ordinary_batch(texts, num_threads=2)
    every = theirs.encode_batch(texts, allowed_special="all")
    ids, offsets = ours.encode_batch_to_numpy(texts, allowed_special="all", num_threads=2)
    assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == every
    ids, offsets = ours.encode_ordinary_batch_to_numpy(texts)
    assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == theirs.encode_ordinary_batch(texts)
    assert ours.decode_batch(every) == theirs.decode_batch(every)
    assert ours.decode_bytes_batch(every) == theirs.decode_bytes_batch(every)


def assert_prefixes(ours, theirs, text: str) -> None:
    """prefix_index: every prefix on a character boundary encodes as tiktoken encodes it,
    and the last tokens name tokens of the right lengths."""
    if not ours.incremental:
        return
    index = ours.prefix_index(text)
    data = text.encode()
    for chars in range(len(text) + 1):
        nbytes = len(text[:chars].encode())
        assert index.encode(nbytes) == theirs.encode_ordinary(text[:chars]), (text, chars)
    for end, (token, length) in enumerate(ours.prefix_last_tokens(text), 1):
        assert length == len(theirs.decode_single_token_bytes(token))
        assert data[:end].endswith(theirs.decode_single_token_bytes(token))


def assert_unknown_ids_fail_alike(ours, theirs, ids: list[int]) -> None:
    """Decoding ids that are no token raises as tiktoken raises."""
    for token in ids:
        for call in ("decode", "decode_bytes", "decode_tokens_bytes", "decode_with_offsets"):
            mine, want = outcome(lambda: getattr(ours, call)([token])), outcome(lambda: getattr(theirs, call)([token]))
            assert mine == want, (call, token)
        assert outcome(lambda: ours.decode_single_token_bytes(token)) == outcome(
            lambda: theirs.decode_single_token_bytes(token)
        ), token
        assert type(outcome(lambda: ours.decode_single_token_bytes(token))) is tuple  # it raised


# --------------------------------------------------------------------------- the example
@pytest.mark.parametrize("top", HUGE_RANKS)
@pytest.mark.parametrize("pat_str", [CL100K_PAT_STR, SIMPLE_PATTERN], ids=["cl100k", "simple"])
def test_one_merge_at_a_huge_rank(top, pat_str):
    """{256 bytes, b"ab": top} with a special token above everything, one between the ranks
    and one on a byte's rank: every API as tiktoken, and unknown ids refused as tiktoken."""
    above = top + 1 if top + 1 < 2**32 - 1 else top - 2
    specials = {"<|endoftext|>": above, "<|fim_prefix|>": 5000, "<|x|>": 97}
    ours, theirs = both(BYTES | {b"ab": top}, specials, pat_str)
    assert ours._core_bpe._vocab.info["sparse_ids"] == 1
    assert ours.incremental
    assert_same(ours, theirs, TEXTS)
    assert_prefixes(ours, theirs, "abab cab ab ba")
    unknown = [256, 4999, 5001, top - 1, (top + 256) // 2, 2**32 - 1, -1, 2**32, 2**40]
    assert_unknown_ids_fail_alike(ours, theirs, unknown + ([top + 2] if top + 2 < 2**32 - 1 else []))


#: A child that builds the issue's vocabulary with b"ab" at the rank it is given, under an
#: address-space cap of 1 GiB more than the interpreter uses, and prints its peak RSS in KiB
#: (or the error: the tables used to be sized by the largest rank, gigabytes).
MEMORY_CHILD = textwrap.dedent(
    """
    import resource, sys
    import tiktoken_inc

    def vm_size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    limit = vm_size() + (1 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": int(sys.argv[1])}
    try:
        enc = tiktoken_inc.Encoding(name="x", pat_str=sys.argv[2], mergeable_ranks=ranks,
                                    special_tokens={"<|end|>": 2**32 - 2})
        assert enc.encode("abab") == [int(sys.argv[1])] * 2
        assert enc.heal(enc.encode("abab a"))[1] == "a"  # (token lengths by id)
        assert enc.prefix_index("abab").encode(4) == [int(sys.argv[1])] * 2
    except MemoryError as error:
        print("MemoryError", error)
        sys.exit(0)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def _peak_kib(top: int, pat_str: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(top), pat_str], capture_output=True, text=True,
        timeout=300, cwd=OUTSIDE_TREE,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().isdigit(), f"rank {top}: {result.stdout.strip()}"
    return int(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("pat_str", [CL100K_PAT_STR, SIMPLE_PATTERN], ids=["cl100k", "simple"])
def test_memory_shape_does_not_follow_the_largest_rank(pat_str):
    """Peak memory of a process that builds {256 bytes, b"ab": top} (and a special token at
    2**32 - 2), heals and indexes prefixes: the same for a top of 300 (dense), 10**6, 10**8,
    10**9 and 2**32 - 2, within 8 MiB (the tables of 257 tokens are kilobytes; the rest is
    the interpreter).  It used to be about 38 bytes per rank: gigabytes at 10**8."""
    peaks = {top: _peak_kib(top, pat_str) for top in (300, 10**6, 10**8, 10**9, 2**32 - 2)}
    assert max(peaks.values()) - min(peaks.values()) < 8 * 1024, peaks


def test_dense_ranks_with_a_special_token_far_above():
    """Dense ranks and a special token at 2**32 - 2 (the ranks stay ids): every API as
    tiktoken, heal and prefix_index included (their table of lengths by id is a dict then,
    not 2**32 entries)."""
    ours, theirs = both(BYTES | {b"ab": 256, b"abab": 257}, {"<|endoftext|>": 2**32 - 2, "<|x|>": 5000})
    assert ours._core_bpe._vocab.info["sparse_ids"] == 0
    assert_same(ours, theirs, TEXTS)
    assert_prefixes(ours, theirs, "abab cab ab ba")
    assert_unknown_ids_fail_alike(ours, theirs, [258, 4999, 5001, 2**32 - 3, 2**32 - 1])


# --------------------------------------------------------------------------- a large sparse vocabulary
@pytest.fixture(scope="module")
def sparse_cl100k():
    """cl100k_base's ranks past the bytes spread 10,007 apart (up to about 10**9), with its
    special tokens moved: <|endoftext|> above every rank, <|fim_prefix|> between two, and
    <|fim_middle|> on an ordinary token's rank (tiktoken allows it)."""
    ranks = spread(dict(bundled_ranks("cl100k_base")), 10_007, 1_000_000)
    specials = {
        "<|endoftext|>": 2**32 - 2,
        "<|fim_prefix|>": 1_000_000 + 300 * 10_007 + 1,
        "<|fim_middle|>": 1_000_000 + 300 * 10_007,
        "<|fim_suffix|>": 100_264,
        "<|endofprompt|>": 100_276,
    }
    return both(ranks, specials)


def test_spread_cl100k_every_api(sparse_cl100k, reference):
    ours, theirs = sparse_cl100k
    info = ours._core_bpe._vocab.info
    assert info["sparse_ids"] == 1 and info["token_count"] == 100_256 and ours.incremental
    # The tables are sized by the tokens: as large as cl100k_base's own, not 10**9 ranks.
    dense = reference("cl100k_base")
    assert info["memory_bytes"] < 1.2 * tiktoken_inc.get_encoding("cl100k_base")._core_bpe._vocab.info["memory_bytes"]
    texts = TEXTS + [dense.decode(list(range(k, 100_000, 997))) for k in range(3)]
    assert_same(ours, theirs, texts)
    assert_prefixes(ours, theirs, "hello world, it's 2024: 12345678 café 你好 aaaaaaaa")
    first, second = 1_000_000 + 300 * 10_007, 1_000_000 + 301 * 10_007
    assert_unknown_ids_fail_alike(ours, theirs, [256, 257, first + 2, second - 1, 1_000_000 + 100_256 * 10_007, 2**32 - 3])


@pytest.mark.parametrize("step", [2, 3, 1000, 40_000])
def test_spread_cl100k_corpora_like_text(step, corpora, reference):
    """Real text through a spread copy of cl100k_base, at several spacings."""
    ranks = spread(dict(bundled_ranks("cl100k_base")), step, 0)
    ours, theirs = both(ranks, {"<|endoftext|>": 2**32 - 2})
    assert ours._core_bpe._vocab.info["sparse_ids"] == (step > 2)
    for path in sorted(corpora.glob("*.txt")):
        text = path.read_text(encoding="utf-8")[:200_000]
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), path.name
        chunks = [text[k:k + 4096] for k in range(0, len(text), 4096)]
        assert ours.encode_ordinary_batch(chunks, num_threads=2) == theirs.encode_ordinary_batch(chunks), path.name


# --------------------------------------------------------------------------- small and random ones
def test_custom_pattern_and_improper_vocabularies():
    """A compiled custom pattern, and improper vocabularies (properized; one with a watched
    token, aaa ranked before aa), with sparse ranks."""
    pattern = r"[a-z]+|\d{1,3}| ?[^\sa-z\d]+|\s+"
    proper = ref.small_vocab(["ab", "ba", "aba", "bab", " a", " b", "12", "123"])
    improper = ref.small_vocab(["abc", "ab", "bc"])
    watched = ref.small_vocab(["aaa", "abc", "aa", "ab", "bc"])
    for ranks, moved, watching in ((proper, 0, 0), (improper, 1, 0), (watched, 2, 1)):
        ours, theirs = both(spread(ranks, 7_777_777, 12345), {"<|end|>": 3_000_000_000, "<|x|>": 300}, pattern)
        info = ours._core_bpe._vocab.info
        assert info["sparse_ids"] == 1 and ours.incremental
        assert (info["moved_rules"], info["watched_tokens"]) == (moved, watching)
        rng = random.Random(3)
        texts = TEXTS + ["".join(rng.choice("abc 123\n<|end|>") for _ in range(rng.randint(1, 80))) for _ in range(50)]
        assert_same(ours, theirs, texts)
        assert_unknown_ids_fail_alike(ours, theirs, [256, 12346, 3_000_000_001, 301])


@st.composite
def sparse_vocabularies(draw):
    """256 bytes and up to 12 merges over {a, b, c, space}, in a random order, their ranks
    (and the bytes', sometimes) drawn anywhere below 2**32 - 1, keeping that order; special
    tokens anywhere, even on a rank."""
    pool = [s for n in range(2, 5) for s in ref.all_strings("abc ", n, n)]
    tokens = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12, unique=True))
    scrambled_bytes = draw(st.booleans())
    ids = sorted(draw(st.lists(st.integers(0, 2**32 - 2), min_size=256 + len(tokens),
                               max_size=256 + len(tokens), unique=True)))
    order = [bytes([b]) for b in range(256)]
    if scrambled_bytes:
        draw(st.randoms(use_true_random=False)).shuffle(order)
        order = order + [t.encode() for t in tokens]
        draw(st.randoms(use_true_random=False)).shuffle(order)  # bytes among the merges too
        ranks = dict(zip(order, ids))
    else:
        ranks = {token: ids[b] for b, token in enumerate(order)}
        ranks.update({t.encode(): ids[256 + k] for k, t in enumerate(tokens)})
    special_ids = draw(st.lists(st.one_of(st.sampled_from(ids), st.integers(0, 2**32 - 2)), max_size=3, unique=True))
    specials = {f"<|s{k}|>": special for k, special in enumerate(special_ids)}
    return ranks, specials


@settings(max_examples=300, deadline=None)
@given(vocabulary=sparse_vocabularies(), texts=st.lists(st.text("abc \n<|s0>", max_size=40), min_size=1, max_size=6),
       probes=st.lists(st.integers(0, 2**32 - 2), max_size=5))
def test_random_sparse_vocabularies(vocabulary, texts, probes):
    """Random sparse vocabularies against tiktoken: encode, encode_ordinary, the stream and
    decode; random ids (mostly no token) decode, or fail, as in tiktoken."""
    ranks, specials = vocabulary
    ours, theirs = both(ranks, specials, SIMPLE_PATTERN)
    assert ours.max_token_value == theirs.max_token_value
    for text in texts:
        full = theirs.encode(text, allowed_special="all")
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text
        assert ours.encode(text, allowed_special="all") == full, text
        assert ours.decode_bytes(full) == theirs.decode_bytes(full)
        encoder = ours.stream_encoder(allowed_special="all")
        assert [i for c in text for i in encoder.feed(c)] + encoder.finish() == full, text
        assert ours.count_tokens(text, allowed_special="all") == len(full)
    for token in probes + [max(ranks.values()) + 1, min(ranks.values()) - 1]:
        assert outcome(lambda: ours.decode_bytes([token])) == outcome(lambda: theirs.decode_bytes([token])), token
        assert outcome(lambda: ours.decode_single_token_bytes(token)) == outcome(
            lambda: theirs.decode_single_token_bytes(token)
        ), token


R50K_HEAD = 3000  # r50k_base's first ranks: a real BPE vocabulary (each merge of earlier tokens)


@pytest.fixture(scope="module")
def r50k_head():
    """r50k_base's first R50K_HEAD tokens in rank order."""
    items = sorted(bundled_ranks("r50k_base").items(), key=lambda item: item[1])
    return [token for token, _ in items[:R50K_HEAD]]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), widest_gap=st.sampled_from([1, 2, 3, 1000, 2**20]),
       jumps=st.lists(st.tuples(st.integers(0, R50K_HEAD - 1), st.integers(1, 2**29)), max_size=3),
       first=st.one_of(st.just(0), st.integers(0, 2**21)),
       special_ids=st.lists(st.integers(0, 2**32 - 2), max_size=3, unique=True),
       texts=st.lists(st.text(st.sampled_from("the quick brown fox, jumps! 1234\n\t'sé你"), max_size=60),
                      min_size=1, max_size=4))
@example(seed=0, widest_gap=1, jumps=[], first=0, special_ids=[1], texts=["111111"])  # <|s0|> and "!" are id 1
def test_random_spread_of_a_real_vocabulary(r50k_head, seed, widest_gap, jumps, first, special_ids, texts):
    """r50k_base's first tokens, their order (merge priority) kept, at random increasing ids:
    gaps of 1 to widest_gap and a few jumps, up to about 2**32 - 2**30 (dense enough to keep
    ids as ranks with small gaps): encode, the stream, truncate, batches and decode as
    tiktoken; ids between the tokens fail to decode alike."""
    rng = random.Random(seed)  # (3,000 gaps drawn by hypothesis itself are too large an example)
    gaps = [rng.randint(1, widest_gap) for _ in r50k_head]
    for at, size in jumps:
        gaps[at] += size
    ids = list(itertools.accumulate(gaps, initial=first))[1:]
    assert ids[-1] < 2**32 - 2**30
    ranks = dict(zip(r50k_head, ids))
    specials = {f"<|s{k}|>": special for k, special in enumerate(special_ids)}
    ours, theirs = both(ranks, specials, R50K_PAT_STR)
    texts = [text + "".join(specials)[: len(text) % 9] for text in texts]
    for text in texts:
        full = theirs.encode(text, allowed_special="all")
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text
        assert ours.encode(text, allowed_special="all") == full, text
        decoded = ours.decode(full)
        assert decoded == theirs.decode(full)
        if not set(special_ids) & set(ids):  # (a special id that is also a token's decodes as the token,
            assert decoded == text            # in tiktoken too)
        encoder = ours.stream_encoder(allowed_special="all")
        assert [i for k in range(0, len(text), 5) for i in encoder.feed(text[k:k + 5])] + encoder.finish() == full
        assert ours.count_tokens(text, allowed_special="all") == len(full)
        tokens, prefix = ours.truncate(text, len(full) // 2, allowed_special="all")
        assert tokens == full[: len(tokens)] == theirs.encode(prefix, allowed_special="all"), text
    assert ours.encode_ordinary_batch(texts, num_threads=2) == theirs.encode_ordinary_batch(texts)
    for token in (ids[0] - 1, ids[7] + 1, ids[-1] + 1, (ids[100] + ids[101]) // 2):
        assert outcome(lambda: ours.decode_bytes([token])) == outcome(lambda: theirs.decode_bytes([token])), token


# --------------------------------------------------------------------------- images
SPARSE_CACHE_CHILD = r"""
import sys, tiktoken_inc
from tiktoken_inc.registry import CL100K_PAT_STR, R50K_PAT_STR, bundled_ranks
ranks = {t: r if r < 256 else 5 * 10**8 + 37 * r for t, r in bundled_ranks("cl100k_base").items()}
enc = tiktoken_inc.Encoding("sparse", pat_str=CL100K_PAT_STR, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 2**32 - 2})
ids = enc.encode(sys.argv[1], allowed_special="all")
print(hasattr(enc._core_bpe._vocab, "_image"), ids, enc.decode(ids) == sys.argv[1])
"""


def test_sparse_vocabulary_image_is_cached_and_mapped(tmp_path):
    """A sparse custom vocabulary's image holds its ids: a later process maps it and gives
    tiktoken's ids."""
    text = "hello world <|endoftext|> 你好 12345"
    ranks = {t: r if r < 256 else 5 * 10**8 + 37 * r for t, r in bundled_ranks("cl100k_base").items()}
    want = tiktoken.Encoding("sparse", pat_str=CL100K_PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 2**32 - 2}).encode(text, allowed_special="all")
    outputs = []
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-c", SPARSE_CACHE_CHILD, text], capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(tmp_path)), cwd=OUTSIDE_TREE,
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout.strip())
    assert outputs == [f"False {want} True", f"True {want} True"]


def test_image_with_damaged_ids_is_refused(tmp_path):
    """The id table of an image is checked (ascending, below 2**32 - 1): one out of order,
    with the checksum made to match, is refused."""
    from tiktoken_inc._cache import _map
    from tiktoken_inc._native import NativeVocab
    from tiktoken_inc._tki import ffi, lib

    vocab = NativeVocab(spread(ref.small_vocab(["ab", "ba", "aba"]), 10**6, 10**6), {})
    path = tmp_path / "sparse.tkivocab"
    vocab.write_image(str(path))
    assert NativeVocab.from_image(_map(str(path))).encode_pieces([b"abab"]) == vocab.encode_pieces([b"abab"])
    size, data, padding = ffi.new("uint64_t *"), ffi.new("uint8_t **"), ffi.new("uint64_t *")
    lib.tki_vocab_image_header(vocab._vocab, ffi.NULL, 0, size)
    at, index = size[0], 0
    sections = []
    while lib.tki_vocab_image_piece(vocab._vocab, index, data, size, padding) == lib.TKI_OK:
        sections.append((at, size[0]))
        at += size[0] + padding[0]
        index += 1
    offset, length = sections[7]  # pool, offsets, lengths, kinds, hash, flags, rules, then the ids
    assert length == 4 * 259
    original = path.read_bytes()
    for craft in ("swap", "none", "equal"):
        image = bytearray(original)
        ids = memoryview(image)[offset:offset + length].cast("I")
        if craft == "swap":
            ids[100], ids[101] = ids[101], ids[100]
        elif craft == "none":
            ids[258] = 2**32 - 1
        else:
            ids[257] = ids[256]
        del ids
        assert lib.tki_vocab_image_seal(ffi.from_buffer(image), len(image)) == lib.TKI_OK
        path.write_bytes(image)
        assert NativeVocab.from_image(_map(str(path))) is None, craft
