"""The pattern compiler (tiktoken_inc/_pattern.py, csrc/pattern.c) against tiktoken's own split.

tiktoken does not hand out its pieces, but its whole-piece shortcut does: with a vocabulary of
the 256 bytes plus every substring of a text, each piece of the text is itself a token, so the
ids of `encode_ordinary`, decoded one by one, are exactly tiktoken's pieces (`tiktoken_pieces`).
For long texts the vocabulary is the 256 bytes plus *our* pieces (`agrees_with_tiktoken`): where
tiktoken splits the same way, its ids decode to our pieces one for one.

Checked: every class of each known pattern against tiktoken on every code point; the split of
the open-model patterns and of tiktoken's own (compiled, though they keep their hand-written
splitters) on random text over the characters each pattern tells apart, on every string of
three such characters laid end to end, and on the corpora; random patterns of the supported
subset; the patterns the compiler refuses, which `regex` splits exactly as before; damaged
programs; that a split takes linear time where a naive scan would take quadratic; and the
patterns that borrow a built-in splitter (`same_split`), exact where their last piece differs.
"""
from __future__ import annotations

import itertools
import random

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
from support import best_time
from tiktoken_inc._native import CompiledPattern, pretokenize
from tiktoken_inc._corebpe import _compiled_pattern
from tiktoken_inc._pattern import (SURROGATES, UnsupportedPattern, compile_body, compile_pattern, contains,
                                   pattern_classes, same_split)
from tiktoken_inc._tki import lib
from tiktoken_inc.open_models import PATTERNS as OPEN_PATTERNS
from tiktoken_inc.registry import CL100K_PAT_STR, O200K_PAT_STR, R50K_PAT_STR

BUILTIN = {"r50k": (R50K_PAT_STR, lib.TKI_PATTERN_R50K), "cl100k": (CL100K_PAT_STR, lib.TKI_PATTERN_CL100K),
           "o200k": (O200K_PAT_STR, lib.TKI_PATTERN_O200K)}
ALL_PATTERNS = {**OPEN_PATTERNS, **{name: pat for name, (pat, _) in BUILTIN.items()}}
BYTES = {bytes([b]): b for b in range(256)}
ALL_TEXT = "".join(chr(cp) for cp in range(0x110000) if not SURROGATES[0] <= cp < SURROGATES[1])
#: Characters every random text may also draw from: contractions and their letters in both
#: cases (and the two non-ASCII letters that fold to s and k), digits of other scripts, marks,
#: letters of each case class, CJK, emoji, each kind of whitespace, punctuation.
EXTRA = list("aAzZsStTrRlLvVmMdDeEkK'\t\n\r \x0b\x0c0159٣²½中文日本語가ÉéǅʰªÆß.,!?/-_\"()😀ſK\u0301\u0903"
             "\u00a0\u3000\u2028\u0085") + ["'s", "'ll", "'RE", "'Ve", "\r\n", "  ", "\n\n"]


def _tiktoken(pat_str: str, ranks: dict[bytes, int]):
    import tiktoken

    return tiktoken.Encoding("probe", pat_str=pat_str, mergeable_ranks=ranks, special_tokens={})


def tiktoken_pieces(pat_str: str, text: str) -> list[str]:
    """tiktoken's pieces of a short text: every substring of the text is a token, so the
    whole-piece shortcut turns each piece into one id."""
    data = text.encode("utf-8")
    starts = [i for i in range(len(data) + 1) if i == len(data) or data[i] & 0xC0 != 0x80]
    ranks = dict(BYTES)
    for a, b in itertools.combinations(starts, 2):
        if b - a >= 2:
            ranks.setdefault(data[a:b], len(ranks))
    enc = _tiktoken(pat_str, ranks)
    return [enc.decode_single_token_bytes(t).decode("utf-8") for t in enc.encode_ordinary(text)]


def agrees_with_tiktoken(pat_str: str, pieces: list[bytes]) -> bool:
    """Whether tiktoken splits b"".join(pieces) into these pieces: with our pieces as its
    tokens, its ids decode to them one for one when it splits the same way."""
    ranks = dict(BYTES)
    for piece in pieces:
        ranks.setdefault(piece, len(ranks))
    enc = _tiktoken(pat_str, ranks)
    text = b"".join(pieces).decode("utf-8")
    return [enc.decode_single_token_bytes(t) for t in enc.encode_ordinary(text)] == pieces


@pytest.fixture(scope="module", params=sorted(ALL_PATTERNS))
def pattern(request, tiktoken_offline):
    name = request.param
    return name, ALL_PATTERNS[name], CompiledPattern(compile_pattern(ALL_PATTERNS[name]))


def test_known_patterns_compile():
    """Every open-model pattern is split in C, and so is each of tiktoken's (which keep
    their hand-written splitters in Encoding)."""
    for name, pat_str in ALL_PATTERNS.items():
        assert compile_pattern(pat_str)[:4] == b"TKIP", name
        encoding = tiktoken_inc.Encoding(name, pat_str=pat_str, mergeable_ranks=BYTES, special_tokens={})
        assert encoding.pretokenizer == (f"builtin:{name}" if name in BUILTIN else "compiled")
        assert encoding.pretokenizer_reason is None


def test_classes_equal_tiktoken_on_every_code_point(pattern, tiktoken_offline):
    """Each bracketed class and class escape of the pattern holds exactly the characters
    tiktoken's engine matches with it (its own, older Unicode tables), on every code point."""
    name, pat_str, _ = pattern
    for source, charset in dict(pattern_classes(pat_str)).items():
        kept = bytes(_tiktoken(source, BYTES).encode_ordinary(ALL_TEXT)).decode("utf-8")
        ours = "".join(c for c in ALL_TEXT if contains(charset, ord(c)))
        assert ours == kept, f"{name}: {source} differs on {sorted(set(ours) ^ set(kept))[:20]}"


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_text_splits_as_tiktoken(pattern, data):
    """Random text over the characters the pattern tells apart (one of each class) and the
    usual suspects: the pieces equal tiktoken's exactly."""
    name, pat_str, compiled = pattern
    alphabet = [chr(c) for c in compiled.representatives()] + EXTRA
    text = "".join(data.draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=24)))
    got = [piece.decode("utf-8") for piece in compiled.pretokenize(text.encode("utf-8"))]
    assert got == tiktoken_pieces(pat_str, text), (name, text)


def test_every_three_classes_split_as_tiktoken(pattern):
    """Every string of three characters of the pattern's classes, laid end to end (so every
    class meets every other in every order, at a piece's start and inside it)."""
    name, pat_str, compiled = pattern
    alphabet = [chr(c) for c in compiled.representatives()] + ["'", "s", "S", "\n", " "]
    text = "".join("".join(t) for t in itertools.product(sorted(set(alphabet)), repeat=3))
    pieces = compiled.pretokenize(text.encode("utf-8"))
    assert b"".join(pieces) == text.encode("utf-8")
    assert agrees_with_tiktoken(pat_str, pieces), name


def test_every_code_point_in_context(pattern):
    """Every code point (so every entry of the C matcher's class table), between a letter, a
    digit and a space."""
    name, pat_str, compiled = pattern
    step = 1 << 16
    for start in range(0, len(ALL_TEXT), step):
        text = "".join(f"{c}a{c}1 {c}" for c in ALL_TEXT[start : start + step])
        assert agrees_with_tiktoken(pat_str, compiled.pretokenize(text.encode("utf-8"))), (name, start)


def test_corpora_split_as_tiktoken(pattern, corpora):
    name, pat_str, compiled = pattern
    for path in sorted(corpora.glob("*.txt")):
        data = path.read_bytes()
        assert agrees_with_tiktoken(pat_str, compiled.pretokenize(data)), (name, path.name)


@pytest.mark.parametrize("name", sorted(BUILTIN))
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80) | st.text(max_size=40).map(lambda t: t.encode("utf-8", "replace")))
def test_compiled_builtins_equal_hand_written_splitters(name, data):
    """tiktoken's own patterns, compiled, split any bytes (invalid UTF-8 too) exactly as the
    hand-written C splitters do."""
    pat_str, pattern_id = BUILTIN[name]
    assert CompiledPattern(compile_pattern(pat_str)).pretokenize(data) == pretokenize(pattern_id, data)


def test_compiled_builtins_equal_hand_written_splitters_on_corpora(corpora):
    for name, (pat_str, pattern_id) in BUILTIN.items():
        compiled = CompiledPattern(compile_pattern(pat_str))
        for path in sorted(corpora.glob("*.txt")):
            data = path.read_bytes()
            assert compiled.pretokenize(data) == pretokenize(pattern_id, data), (name, path.name)


# ---------------------------------------------------------------- borrowed splitters

#: Pairs of patterns and whether `same_split` must find that they split alike: a possessive
#: quantifier where nothing is given back anyway, `\s*[\r\n]` against `\s*[\r\n]+`, and
#: tiktoken's own patterns without `\s++$`; against changes that split otherwise.
SPLIT_ALIKE = [
    (r"\p{L}+|\P{L}", r"\p{L}++|[^\p{L}]", True),
    (r"\S+|\s*[\r\n]|\s", r"\S+|\s*[\r\n]+|\s", True),
    (OPEN_PATTERNS["llama3"], CL100K_PAT_STR.replace(r"\s++$|", ""), True),
    (R50K_PAT_STR, R50K_PAT_STR.replace(r"\s++$|", ""), True),  # \s+(?!\S) takes such a run whole
    (OPEN_PATTERNS["llama3"], CL100K_PAT_STR, False),  # "\n  " at the end: one piece or two
    (OPEN_PATTERNS["qwen2"], CL100K_PAT_STR.replace(r"\s++$|", ""), False),  # digits one by one
    (r"\p{L}+|\P{L}", r"\p{L}|\P{L}", False),
    (r"\S+|\s+(?!\S)|\s", r"\S+|\s+", False),
]


@pytest.mark.parametrize("first, second, alike", SPLIT_ALIKE)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_same_split_tells_patterns_that_split_alike(first, second, alike, data):
    """`same_split` says which programs split alike, and those do split every text alike
    (random text over both patterns' classes and the usual suspects)."""
    a, b = CompiledPattern(compile_pattern(first)), CompiledPattern(compile_pattern(second))
    assert same_split(compile_pattern(first), compile_pattern(second)) == alike
    if alike:
        alphabet = sorted({chr(c) for c in a.representatives() + b.representatives()}) + EXTRA
        text = "".join(data.draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=24))).encode("utf-8")
        assert a.pretokenize(text) == b.pretokenize(text)


def test_compile_body_drops_only_end_anchored_alternatives():
    assert same_split(compile_body(CL100K_PAT_STR), compile_pattern(CL100K_PAT_STR.replace(r"\s++$|", "")))
    assert same_split(compile_body(O200K_PAT_STR), compile_pattern(O200K_PAT_STR))  # it has none
    assert not same_split(compile_body(CL100K_PAT_STR), compile_pattern(CL100K_PAT_STR))


def test_patterns_borrow_the_builtin_splitter_they_split_like():
    """Llama 3's pattern (and GLM-4's, the same) is cl100k_base's without \\s++$: one-shot
    encoding splits it with cl100k_base's hand-written splitter, several times faster than the
    automaton; the other open patterns split unlike any of tiktoken's."""
    assert _compiled_pattern(OPEN_PATTERNS["llama3"]).builtin == lib.TKI_PATTERN_CL100K
    for name in sorted(set(OPEN_PATTERNS) - {"llama3"}):
        assert _compiled_pattern(OPEN_PATTERNS[name]).builtin == 0, name


#: Texts whose last piece tells Llama 3's pattern from cl100k_base's: whitespace with line
#: breaks at the end, after each kind of piece (and alone).
ENDINGS = ["".join(t) for n in range(1, 5) for t in itertools.product(" \n\t\r", repeat=n)]
BEFORE_ENDINGS = ["", "word", "x!", "12", "don't", " ", "\n", "中", "ab " * 300]


def _whitespace_vocabulary_pair(pat_str: str):
    """tiktoken_inc's and tiktoken's Encoding of `pat_str` over the bytes, every piece of 2-5
    whitespace bytes and a few words as one token (so that the ids tell how whitespace and
    those words were split), with one special token, <|x|>."""
    import tiktoken

    ranks = dict(BYTES)
    for n in range(2, 6):
        for piece in itertools.product(b" \n\t\r", repeat=n):
            ranks[bytes(piece)] = len(ranks)
    for word in (b"getURL", b"Word", b"xY"):  # and words as one token, so that ids tell their pieces too
        for end in range(2, len(word) + 1):
            ranks.setdefault(word[:end], len(ranks))
    specials = {"<|x|>": len(ranks)}
    return (tiktoken_inc.Encoding("llama3", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials),
            tiktoken.Encoding("llama3", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials))


def test_borrowed_splitter_leaves_the_last_piece_to_the_pattern(tiktoken_offline):
    """Where the borrowed splitter's last piece differs from the pattern's (cl100k_base's
    \\s++$ takes "\\n  " at the end whole, Llama 3's pattern splits it), one-shot encoding,
    batches, counts and streams still give tiktoken's ids, alone and around a special token."""
    pat_str = OPEN_PATTERNS["llama3"]
    ours, theirs = _whitespace_vocabulary_pair(pat_str)
    compiled = CompiledPattern(compile_pattern(pat_str))
    differ = 0
    for before in BEFORE_ENDINGS:
        for ending in ENDINGS:
            text = before + ending
            data = text.encode("utf-8")
            differ += compiled.pretokenize(data) != pretokenize(lib.TKI_PATTERN_CL100K, data)
            want = theirs.encode_ordinary(text)
            assert ours.encode_ordinary(text) == want, repr(text)
            assert ours.encode_ordinary_batch([text, text + "a"]) == [want, theirs.encode_ordinary(text + "a")]
            mixed = text + "<|x|>" + text
            assert ours.encode(mixed, allowed_special="all") == theirs.encode(mixed, allowed_special="all")
            assert ours.count_tokens(text) == len(want)
            encoder = ours.stream_encoder(disallowed_special=())
            got = [i for k in range(0, len(text), 3) for i in encoder.feed(text[k:k + 3])]
            assert got + encoder.finish() == want, repr(text)
    assert differ > 100  # the texts do reach the pieces the two patterns split otherwise


#: Pieces of text for the streams below: every kind of piece the two patterns split, and the
#: whitespace that tells them apart.
_STREAM_FRAGMENTS = ["word", "Word", " the", "getURL", "xY", "don't", "'S", "12345", " 7", "x!", "?!", "...", "中文", "é",
                     " ", "  ", "\n", "\n\n", "\r\n", "\t", " \n ", "  \n\t", "<|x|>"]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(_STREAM_FRAGMENTS), max_size=40),
       sizes=st.lists(st.integers(1, 19), min_size=1, max_size=6))
def test_borrowed_splitter_in_streams_any_chunks(parts, sizes, tiktoken_offline):
    """A stream with Llama 3's pattern splits what it is fed with cl100k_base's splitter where
    that splitter decides a piece without reading to the end of the fed text, and leaves the
    open piece to the pattern's automaton: fed in chunks of any sizes (cutting pieces,
    whitespace and characters anywhere), every feed's ids are a prefix of tiktoken's, and
    all of them are tiktoken's, with and without the special token allowed."""
    ours, theirs = _whitespace_vocabulary_pair(OPEN_PATTERNS["llama3"])
    text = "".join(parts)
    data = text.encode("utf-8")
    for allowed in (set(), "all"):
        want = theirs.encode(text, allowed_special=allowed, disallowed_special=())
        encoder = ours.stream_encoder(allowed_special=allowed, disallowed_special=())
        got, position, k = [], 0, 0
        while position < len(data):
            size = sizes[k % len(sizes)]
            got += encoder.feed(data[position:position + size])
            assert got == want[: len(got)], (text, sizes, position)
            position, k = position + size, k + 1
        assert got + encoder.finish() == want, (text, sizes)


# ---------------------------------------------------------------- random patterns

_CLASSES = [r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\s", r"\S", r"\p{N}", r"[^\r\n\p{L}\p{N}]", r"[^\s\p{L}\p{N}]", "a",
            "b", " ", r"\n", r"[\p{L}&&[^\p{Lu}]]", r"[ab]", r"[^a]", r"\p{Han}", r"[\p{L}\p{M}]", r"\d", r"\w", ".",
            r"[a-c]", r"[\p{L}--[a-z]]", r"\x{4E2D}", r"\P{L}"]
_QUANTIFIERS = ["", "", "?", "*", "+", "{1,3}", "{2}", "++", "?+", "*+", "+?", "??", "{0,2}", "{1,2}+", "{2,}"]
_ASSERTIONS = [r"(?!\S)", "$", r"(?=a)", r"(?!\s)", r"\z"]


@st.composite
def random_patterns(draw, depth: int = 0) -> str:
    """Alternations of concatenations of quantified classes, groups, case-insensitive
    literals and one-character assertions."""
    def item() -> str:
        kind = draw(st.integers(0, 19))
        if kind == 0 and depth < 2:
            return "(?:" + draw(random_patterns(depth + 1)) + ")" + draw(st.sampled_from(["", "?", "+", "*"]))
        if kind == 1:
            return draw(st.sampled_from(_ASSERTIONS))
        if kind == 2:
            return "(?i:" + draw(st.sampled_from(["'s", "'t", "ab", "s", "'re|'ve"])) + ")" + draw(
                st.sampled_from(["", "?"]))
        return draw(st.sampled_from(_CLASSES)) + draw(st.sampled_from(_QUANTIFIERS))

    branches = ["".join(item() for _ in range(draw(st.integers(1, 3)))) for _ in range(draw(st.integers(1, 3)))]
    return "|".join(branches)


_TAILS = [r"\s+(?!\S)|\s+|\S", r"\S|\s", r"\s+|\S+", r"[\s\S]"]
_RANDOM_ALPHABET = list("aabbxAB  \n\t1٣中é'sSt.,ſ\u0301")


@settings(max_examples=200, deadline=None)
@given(head=random_patterns(), tail=st.sampled_from(_TAILS), data=st.data())
def test_random_patterns_split_as_tiktoken(head, tail, data, tiktoken_offline):
    """Random patterns of the subset (ending in a catch-all, so that most cover every
    character): compiled ones split as tiktoken; refused ones say why."""
    pat_str = head + "|" + tail
    try:
        compiled = CompiledPattern(compile_pattern(pat_str))
    except UnsupportedPattern as error:
        assert str(error)
        return
    for _ in range(8):
        text = "".join(data.draw(st.lists(st.sampled_from(_RANDOM_ALPHABET), min_size=1, max_size=14)))
        got = [piece.decode("utf-8") for piece in compiled.pretokenize(text.encode("utf-8"))]
        assert got == tiktoken_pieces(pat_str, text), (pat_str, text)


# ---------------------------------------------------------------- refusals, encodings

REFUSED = {
    r"(?<=a)b|\S|\s": "look-behind",
    r"\p{L}+|\s+": "does not match at every position",
    r"\S+|\s*": "empty string",
    r"(?:ab)++|\S|\s": "atomic group",
    r"\bx|\S|\s": "escape",
    r"(?:ab)*c|a|b|\S|\s": "quadratic",
    r"(?i:é)|\S|\s": "case-insensitive",
    r"\p{Age=3.0}|\S|\s": "not supported",
    r"x(?=ab)|\S|\s": "look-ahead longer",
}


@pytest.mark.parametrize("pat_str", sorted(REFUSED))
def test_refused_patterns_fall_back_to_regex(pat_str, reference):
    """A pattern outside the subset is split by `regex` as before, says so and why, and
    (where tiktoken takes it) gives tiktoken's ids."""
    with pytest.raises(UnsupportedPattern, match=REFUSED[pat_str]):
        compile_pattern(pat_str)
    ranks = {token: rank for token, rank in reference("r50k_base")._mergeable_ranks.items()}
    try:
        ours = tiktoken_inc.Encoding("x", pat_str=pat_str, mergeable_ranks=ranks, special_tokens={})
    except ValueError:
        return  # `regex` rejects it too
    assert ours.pretokenizer == "regex"
    assert REFUSED[pat_str].split()[0] in ours.pretokenizer_reason
    text = "they're ab abc xx  \n\n 12345 中文 éé"
    try:
        want = _tiktoken(pat_str, ranks).encode_ordinary(text)
    except ValueError:
        return  # tiktoken rejects the pattern
    if pat_str.startswith("\\p{Age"):
        return  # `regex` and tiktoken disagree on Age's tables
    assert ours.encode_ordinary(text) == want


@pytest.mark.parametrize("name", sorted(OPEN_PATTERNS))
def test_encodings_with_compiled_patterns_equal_tiktoken(name, reference, corpora):
    """A whole Encoding (cl100k_base's ranks, an open model's pattern, a special token) gives
    tiktoken's ids on the corpora, with and without allowed special tokens."""
    import tiktoken

    ranks = reference("cl100k_base")._mergeable_ranks
    specials = {"<|x|>": 100300}
    ours = tiktoken_inc.Encoding(name, pat_str=OPEN_PATTERNS[name], mergeable_ranks=ranks, special_tokens=specials)
    theirs = tiktoken.Encoding(name, pat_str=OPEN_PATTERNS[name], mergeable_ranks=ranks, special_tokens=specials)
    assert ours.pretokenizer == "compiled"
    for path in sorted(corpora.glob("*.txt")):
        text = path.read_text(encoding="utf-8")[:200_000]
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), path.name
        mixed = text[:5000] + "<|x|>" + text[5000:10000]
        assert ours.encode(mixed, allowed_special="all") == theirs.encode(mixed, allowed_special="all")
    stable, completions = ours.encode_with_unstable("hello wor")
    want_stable, want_completions = theirs.encode_with_unstable("hello wor")
    assert stable == want_stable and sorted(completions) == sorted(want_completions)


@pytest.mark.parametrize("name", sorted(OPEN_PATTERNS))
def test_streams_over_runs_with_compiled_patterns_equal_tiktoken(name, reference):
    """Runs that stay in one state of the automaton, each byte ending a match (spaces under
    `\\s+(?!\\S)`, letters under `\\p{L}+`) or not (tabs), streamed in chunks that cut them
    anywhere and followed by what ends them differently: tiktoken's ids."""
    import tiktoken

    ranks = reference("cl100k_base")._mergeable_ranks
    ours = tiktoken_inc.Encoding(name, pat_str=OPEN_PATTERNS[name], mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding(name, pat_str=OPEN_PATTERNS[name], mergeable_ranks=ranks, special_tokens={})
    assert ours.pretokenizer == "compiled"
    for unit in (" ", "a", "\t", "é", "  a"):
        for repeat in (1, 2, 63, 65, 1400):
            for tail in ("", "x", " x", "\n", "'s", "中", "1"):
                text = unit * repeat + tail
                want = theirs.encode_ordinary(text)
                assert ours.encode_ordinary(text) == want, (unit, repeat, tail)
                for size in (1, 7, 4096) if repeat < 100 else (7, 4096):
                    encoder = ours.stream_encoder(disallowed_special=())
                    got = [i for k in range(0, len(text), size) for i in encoder.feed(text[k:k + size])]
                    assert got + encoder.finish() == want, (unit, repeat, tail, size)


# ---------------------------------------------------------------- programs, time


def test_damaged_programs_are_refused_or_split_safely():
    """Truncated or altered programs never crash the loader; one that loads still splits
    every text into non-empty pieces that cover it."""
    program = compile_pattern(OPEN_PATTERNS["kimi_k2"])
    rng = random.Random(26)
    text = "Hello, 世界! don't  stop\n\n 12345 ÉCOLE école\xa0é".encode("utf-8") + b"\xff\xc3"
    for length in [0, 3, 27, 28, 100, len(program) - 1, len(program) + 1]:
        with pytest.raises(ValueError):
            CompiledPattern((program + b"\0")[:length])
    for _ in range(400):
        damaged = bytearray(program)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            compiled = CompiledPattern(bytes(damaged))
        except ValueError:
            continue
        pieces = compiled.pretokenize(text)
        assert b"".join(pieces) == text and all(pieces)


@pytest.mark.parametrize("pat_str, unit", [
    (r"x*y|x|\S|\s", "x"),  # each piece is one x; the first alternative scans the whole run
    (OPEN_PATTERNS["llama3"], "\n \t"),  # \s*[\r\n]+ looks for one more newline, far ahead
    (OPEN_PATTERNS["llama3"], "\n" + " " * 50),
])
def test_split_time_is_linear(pat_str, unit):
    """Texts where each match is short but the scan that finds it runs far ahead: 8 times the
    text takes about 8 times as long (a scan that started over at each piece: 64 times)."""
    compiled = CompiledPattern(compile_pattern(pat_str))
    small = (unit * (1 << 13)).encode("utf-8") + b"z"
    large = (unit * (1 << 16)).encode("utf-8") + b"z"
    ratio = best_time(lambda: compiled.piece_ends(large)) / best_time(lambda: compiled.piece_ends(small))
    assert ratio < 24, ratio


def test_regex_fallback_is_exact_for_skipping_patterns(reference):
    """A pattern that skips text (tiktoken drops what no match covers) stays with `regex`."""
    ranks = reference("r50k_base")._mergeable_ranks
    ours = tiktoken_inc.Encoding("x", pat_str=r"\p{L}+", mergeable_ranks=ranks, special_tokens={})
    assert ours.pretokenizer == "regex"
    assert ours.encode_ordinary("ab, cd!") == _tiktoken(r"\p{L}+", ranks).encode_ordinary("ab, cd!")
    assert regex.findall(r"\p{L}+", "ab, cd!") == ["ab", "cd"]
