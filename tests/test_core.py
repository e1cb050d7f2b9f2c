"""The C core through `NativeVocab`, on the four real rank files.

- `prefix_last_tokens(data)` (the incremental step, one pass) against an independent
  reference: for sampled prefix ends i, the last id of tiktoken's
  `_encode_single_piece(data[:i])`;
- on every input here, the centroid search (`method="auto"`) and the linear suffix scan
  (`method="linear"`) agree on every prefix, and `bpe` agrees across auto/linear/heap;
- the regression cases of docs/algorithm.md section 12 (cl100k " @param", runs of spaces and "a");
- regex pieces encoded by `encode_pieces` equal tiktoken's `encode_ordinary`;
- the lookups (`rank`, `token_bytes`, `decode_bytes`) and the build report (`info`).
"""
from __future__ import annotations

import random

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from support import CORPUS_FILES, RANK_FILES


def sample_ends(n: int, rng: random.Random, count: int = 60) -> list[int]:
    """Prefix ends to check: the first 32, the last, and `count` random ones in between."""
    ends = set(range(1, min(n, 32) + 1)) | {n}
    ends |= {rng.randint(1, n) for _ in range(count)} if n else set()
    return sorted(ends)


def check_prefixes(vocab, enc, data: bytes, ends=None, rng=None) -> None:
    """auto == linear on every prefix; both equal tiktoken's last token at the sampled ends;
    bpe(auto) == bpe(linear) == bpe(heap) == tiktoken's single-piece encoding."""
    auto = vocab.prefix_last_tokens(data)
    linear = vocab.prefix_last_tokens(data, method="linear")
    assert len(auto) == len(data)
    for i, (a, b) in enumerate(zip(auto, linear)):
        assert a == b, f"centroid/linear differ at prefix {i + 1} of {data[:80]!r}...: {a} vs {b}"
    if ends is None:
        ends = sample_ends(len(data), rng or random.Random(len(data)))
    for i in ends:
        want = enc._encode_single_piece(data[:i])[-1]
        assert auto[i - 1] == want, f"prefix {data[:i][-60:]!r} (end {i}): core {auto[i - 1]}, tiktoken {want}"
    whole = enc._encode_single_piece(data)
    for method in ("auto", "linear", "heap"):
        assert vocab.bpe(data, method=method) == whole, f"bpe(method={method}) of {data[:80]!r}..."


@pytest.fixture(scope="module", params=RANK_FILES)
def real(request, native_vocab, reference, ranks_of):
    """(name, NativeVocab, tiktoken Encoding, ranks) for one real rank file."""
    name = request.param
    return name, native_vocab(name), reference(name), ranks_of(name)


# --------------------------------------------------------------------------- build report
def test_real_vocabularies_build_incremental(real):
    """Every OpenAI file is canonical and proper: incremental, no non-canonical or improper tokens."""
    name, vocab, _, ranks = real
    assert vocab.incremental is True
    info = vocab.info
    assert info["incremental"] == 1
    assert info["noncanonical_count"] == 0
    assert info["improper_count"] == 0
    assert info["token_count"] == len(ranks)
    assert info["special_count"] == 0
    assert info["max_rank"] == max(ranks.values())
    assert info["max_token_bytes"] == max(map(len, ranks))


def test_lookups_and_decode(real):
    """rank/token_bytes round-trip for every token; holes and unknown bytes give None; decode_bytes."""
    name, vocab, _, ranks = real
    for token, rank in ranks.items():
        assert vocab.rank(token) == rank
        assert vocab.token_bytes(rank) == token
    holes = set(range(max(ranks.values()) + 1)) - set(ranks.values())
    for hole in holes | {max(ranks.values()) + 1, 2**32 - 1, -1}:
        assert vocab.token_bytes(hole) is None
    assert vocab.rank(b"\x00" * 200) is None
    assert vocab.rank(b"") is None
    ids = sorted(ranks.values())
    assert vocab.decode_bytes(ids) == b"".join(t for t, _ in sorted(ranks.items(), key=lambda kv: kv[1]))
    bad = max(ranks.values()) + 1
    with pytest.raises(KeyError) as info:
        vocab.decode_bytes([ids[0], bad])
    assert info.value.args == (f"Invalid token for decoding: {bad}",)


def test_lookups_of_keys_that_differ_past_the_slot(real):
    """Keys that share a token's length and first 11 bytes (all that a hash slot holds) and
    differ further on are found as what they are, through `rank` and, as pieces of text,
    through `encode_text`.  (tests/c/test_core.c makes such keys land in the token's slot.)"""
    name, vocab, enc, ranks = real
    long_tokens = sorted((t for t in ranks if len(t) >= 12), key=len)
    rng = random.Random(12)
    sample = long_tokens[:: max(1, len(long_tokens) // 3000)] + long_tokens[-50:]
    checked = 0
    for token in sample:
        for at in {11, len(token) // 2 + 6, len(token) - 8, len(token) - 1}:
            if not 11 <= at < len(token):
                continue
            variant = token[:at] + bytes([token[at] ^ (1 + rng.randrange(255))]) + token[at + 1 :]
            assert vocab.rank(variant) == ranks.get(variant), (token, at)
            checked += 1
    assert checked > 1000
    from tiktoken_inc._tki import lib

    pattern = {"r50k_base": lib.TKI_PATTERN_R50K, "p50k_base": lib.TKI_PATTERN_R50K,
               "cl100k_base": lib.TKI_PATTERN_CL100K, "o200k_base": lib.TKI_PATTERN_O200K}[name]
    words = [t for t in sample if t[:1] == b" " and t[1:].isalpha() and t[1:].islower()]
    # the last letter moved on by one: the same piece length and first 11 bytes
    text = "".join(w[:-1].decode() + chr((w[-1] - ord("a") + 1) % 26 + ord("a")) for w in words)
    assert len(words) > 100
    assert vocab.encode_text(pattern, text.encode())[0] == enc.encode_ordinary(text)


def test_specials_decode_but_never_merge(ranks_of):
    """Special tokens passed to the core decode, and their text still encodes as ordinary bytes."""
    from tiktoken_inc._native import NativeVocab

    ranks = ranks_of("r50k_base")
    vocab = NativeVocab(ranks, {"<|endoftext|>": 50256})
    assert vocab.token_bytes(50256) == b"<|endoftext|>"
    assert vocab.decode_bytes([50256, ranks[b"hello"]]) == b"<|endoftext|>hello"
    assert 50256 not in vocab.bpe(b"<|endoftext|>")
    assert vocab.info["special_count"] == 1


# --------------------------------------------------------------------------- regression cases
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
def test_param_regression(name, native_vocab, reference):
    """cl100k " @param" caught centroid entries keyed by the wrong interval: every prefix must match."""
    vocab, enc = native_vocab(name), reference(name)
    for text in [b" @param", b" @param x", b"/** @param {string} name", b" @parameter @params"]:
        check_prefixes(vocab, enc, text, ends=range(1, len(text) + 1))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("char", [b" ", b"a"])
def test_runs_prefix_by_prefix(name, char, native_vocab, reference):
    """Runs of spaces / "a" (10,000 bytes): every prefix up to 600 and a spread beyond, vs tiktoken."""
    vocab, enc = native_vocab(name), reference(name)
    data = char * 10_000
    ends = list(range(1, 601)) + list(range(601, 10_001, 97)) + [1023, 1024, 1025, 4096, 9999, 10_000]
    check_prefixes(vocab, enc, data, ends=ends)


RUN_CHARS = ["a", " ", "\n", "0", "'", "\t", "中", "😀"]


@pytest.mark.parametrize("char", RUN_CHARS, ids=repr)
def test_runs_of_one_character_all_files(char, real):
    """Runs of one character (2,000 of it) as one piece, every file: centroid == linear == tiktoken."""
    _, vocab, enc, _ = real
    check_prefixes(vocab, enc, char.encode() * 2000, rng=random.Random(ord(char[0])))


def _repeat_inputs(seed: int) -> list[bytes]:
    """Long periodic stretches (the steps after a repeat are copied, not run) that break off:
    one byte, short and long units, multi-byte characters, a unit that changes midway, a
    single odd byte inside a run, a period that starts late, and near-periodic noise."""
    rng = random.Random(seed)
    units = [b"a", b" ", b"\n", b"ab", b"aab", "中".encode(), "😀".encode(), b"'s", b" the",
             b"=-", bytes(range(48, 58)), b"\xe4\xbd"]
    out = []
    for unit in units:
        run = unit * (1500 // len(unit) + 1)
        out.append(run)
        out.append(run + b"x" + run[: rng.randrange(1, 900)])
        out.append(rng.choice(units) * 300 + run)
    for _ in range(8):
        parts = [rng.choice(units) * rng.randrange(1, 900) for _ in range(rng.randrange(2, 6))]
        out.append(b"".join(parts))
    noisy = bytearray(b"ab" * 1500)
    for _ in range(5):
        noisy[rng.randrange(len(noisy))] = rng.choice(b"abc ")
    out.append(bytes(noisy))
    return out


def test_repeats_copied_exactly(real):
    """Periodic inputs long enough for the repeat copy: auto (copies) == linear (runs every
    step) on every prefix, and the BPE equals tiktoken's, through every break in the period."""
    _, vocab, enc, _ = real
    for data in _repeat_inputs(len(real[0])):
        check_prefixes(vocab, enc, data, rng=random.Random(len(data)))


# --------------------------------------------------------------------------- generated inputs
def _generated_inputs(ranks: dict, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    long_tokens = [t for t, _ in by_rank if len(t) >= 8]
    out = []
    for _ in range(12):  # random concatenations of tokens, long and short
        out.append(b"".join(rng.choice(by_rank)[0] for _ in range(rng.randint(1, 120))))
        out.append(b"".join(rng.choice(long_tokens) for _ in range(rng.randint(1, 40))))
    for _ in range(6):  # random bytes, and random bytes from a small alphabet
        out.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 400))))
        out.append(bytes(rng.choice(b" \n\ta'01") for _ in range(rng.randint(1, 400))))
    out.append("".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(300)).encode())
    out.append("".join(rng.choice("😀😁👍🏽🇫🇷❤️‍🔥") for _ in range(200)).encode())
    out.append(("The quick brown fox jumps over the lazy dog. " * 20).encode())
    out.append(b"    def f(self, x):\n        return x  # comment\n" * 10)
    return out


def test_generated_text(real):
    """Random token concatenations, random bytes, CJK, emoji, prose, code (each as one piece)."""
    name, vocab, enc, ranks = real
    for k, data in enumerate(_generated_inputs(ranks, seed=RANK_FILES.index(name))):
        check_prefixes(vocab, enc, data, rng=random.Random(k))


def test_long_pieces_slide_the_forest_window(real):
    """Pieces far longer than the window of forest ids a step keeps (16 * (t + 1) entries,
    moved along as it fills): random token concatenations and CJK, no period to copy."""
    name, vocab, enc, ranks = real
    rng = random.Random(RANK_FILES.index(name))
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    inputs = [
        b"".join(rng.choice(by_rank)[0] for _ in range(2500)),
        "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(2500)).encode(),
    ]
    for data in inputs:
        assert len(data) > 16 * (vocab.info["max_token_bytes"] + 1) * 2
        check_prefixes(vocab, enc, data, ends=sample_ends(len(data), rng, count=12), rng=rng)


@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_corpus_windows(corpus, corpora, real):
    """Windows of real text (1,500 bytes, as one piece), 8 per corpus file and rank file."""
    _, vocab, enc, _ = real
    data = (corpora / corpus).read_bytes()
    rng = random.Random(corpus)
    for _ in range(8):
        start = rng.randrange(len(data) - 1500)
        check_prefixes(vocab, enc, data[start : start + 1500], rng=rng)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_hypothesis_bytes_and_token_concatenations(data, native_vocab, reference, ranks_of):
    """Random bytes, or random token concatenations, in a random rank file: every prefix checked."""
    name = data.draw(st.sampled_from(RANK_FILES))
    vocab, enc = native_vocab(name), reference(name)
    if data.draw(st.booleans()):
        piece = data.draw(st.binary(min_size=1, max_size=200))
    else:
        tokens = sorted(ranks_of(name))
        picks = data.draw(st.lists(st.integers(0, len(tokens) - 1), min_size=1, max_size=30))
        piece = b"".join(tokens[i] for i in picks)
    check_prefixes(vocab, enc, piece, ends=range(1, len(piece) + 1))


# --------------------------------------------------------------------------- regex pieces
def _pieces(enc, text: str) -> list[bytes]:
    return [m.encode("utf-8") for m in regex.findall(enc._pat_str, text)]


def test_encode_pieces_matches_tiktoken(real, corpora):
    """encode_pieces over the encoding's regex pieces == tiktoken encode_ordinary (corpus samples)."""
    _, vocab, enc, _ = real
    rng = random.Random(9)
    for corpus in CORPUS_FILES:
        text = (corpora / corpus).read_text(encoding="utf-8")
        for _ in range(3):
            start = rng.randrange(len(text) - 20_000)
            sample = text[start : start + 20_000]
            want = enc.encode_ordinary(sample)
            for method in ("auto", "linear", "heap"):
                assert vocab.encode_pieces(_pieces(enc, sample), method=method) == want, (corpus, start, method)


def test_encode_pieces_generated(real):
    """encode_pieces on regex pieces of generated text == tiktoken (no corpora needed)."""
    _, vocab, enc, ranks = real
    rng = random.Random(21)
    alphabet = "abcXYZ é中文😀 \n\r\t'0123456789.,;!?-_()[]{}<>\u00a0"
    for _ in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 500)))
        want = enc.encode_ordinary(text)
        assert vocab.encode_pieces(_pieces(enc, text)) == want, text
        assert vocab.encode_pieces(_pieces(enc, text), shortcut=False) == want, text  # all tokens canonical


def test_encode_joined_piece_ends(native_vocab, reference):
    """encode_joined with explicit piece ends equals encoding the pieces one by one."""
    vocab, enc = native_vocab("cl100k_base"), reference("cl100k_base")
    pieces = [b"hello", b" world", b"!!!", b" ", b"\xe4\xb8", b"\xad"]
    data = b"".join(pieces)
    ends = [sum(map(len, pieces[: k + 1])) for k in range(len(pieces))]
    want = [t for p in pieces for t in enc._encode_single_piece(p)]
    assert vocab.encode_joined(data, ends) == want
    assert vocab.encode_pieces(pieces) == want


def test_threads_share_a_vocabulary(native_vocab, reference, ranks_of):
    """One NativeVocab used from four threads at once gives the same ids as tiktoken."""
    from concurrent.futures import ThreadPoolExecutor

    vocab, enc = native_vocab("o200k_base"), reference("o200k_base")
    inputs = _generated_inputs(ranks_of("o200k_base"), seed=99) * 4
    want = [enc._encode_single_piece(data) for data in inputs]
    want_last = [vocab.prefix_last_tokens(data) for data in inputs]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(vocab.bpe, inputs)) == want
        assert list(pool.map(vocab.prefix_last_tokens, inputs)) == want_last


def test_docstrings_have_utf8():
    """Every docstring of the package can be written as UTF-8: from Python 3.13 the compiler
    does so to dedent it, and a lone surrogate in one (an example written with one backslash
    where it needs two) makes importing the module fail there."""
    import ast
    from pathlib import Path

    import tiktoken_inc

    package = Path(tiktoken_inc.__file__).parent
    sources = sorted(package.glob("*.py"))
    assert len(sources) > 10
    for source in sources:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    doc.encode("utf-8")  # UnicodeEncodeError names the surrogate
