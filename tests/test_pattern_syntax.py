"""Custom patterns are split exactly as tiktoken's regex engine splits them, or refused.

tiktoken compiles `pat_str` with Rust's fancy-regex; tiktoken_inc splits patterns it has no C
splitter for with the `regex` package, after translating them (`tiktoken_inc._regex_syntax`).
Each test here states one place where the two syntaxes read the same text differently and
compares with tiktoken itself.  `tiktoken_pieces` gets tiktoken's pieces: with a vocabulary
holding every substring of the text, each piece is one token (tiktoken looks a piece up whole
before any merge), so decoding the ids one by one gives the pieces.
"""
from __future__ import annotations

import random

import pytest
import tiktoken

import tiktoken_inc
from tiktoken_inc._regex_syntax import to_regex

SINGLE_BYTES = {bytes([b]): b for b in range(256)}


def _substring_ranks(text: str) -> dict[bytes, int]:
    data = text.encode("utf-8")
    substrings = {data[i:j] for i in range(len(data)) for j in range(i + 2, len(data) + 1)}
    ranks = dict(SINGLE_BYTES)
    for rank, token in enumerate(sorted(substrings, key=lambda t: (len(t), t)), start=256):
        ranks[token] = rank
    return ranks


def tiktoken_pieces(pattern: str, text: str) -> list[str]:
    """tiktoken's split of `text` by `pattern`."""
    enc = tiktoken.Encoding("pieces", pat_str=pattern, mergeable_ranks=_substring_ranks(text), special_tokens={})
    return [enc.decode_single_token_bytes(t).decode("utf-8") for t in enc.encode_ordinary(text)]


def our_pieces(pattern: str, text: str) -> list[str]:
    """tiktoken_inc's split, through the same vocabulary (so the ids are compared too)."""
    ranks = _substring_ranks(text)
    ours = tiktoken_inc.Encoding("pieces", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("pieces", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    return [ours.decode_single_token_bytes(t).decode("utf-8") for t in ours.encode_ordinary(text)]


# (pattern, text): each reads differently in the `regex` package as written.
DIFFERENCES = [
    # class set operations (V0 reads && as literal ampersands)
    (r"[\p{L}&&[^\p{Han}]]+|\s+|.", "ab 你好 café"),
    (r"[\p{L}--\p{Greek}]+|.", "aαbβ"),
    (r"[\p{L}~~\p{Greek}]+|.", "aαbβ\u0374"),
    # one precedence, left to right (V1: -- before && before ~~)
    (r"[\p{L}~~\p{Greek}&&\p{Uppercase}]+|.", "AaΑαBΒ1"),
    (r"[\p{Lu}--\p{Greek}--[A-C]]+|.", "ABDEΑΒ"),
    (r"[^\p{L}&&\p{Greek}]+|.", "AaΑαBΒ1"),
    # nested classes, and characters that are operators in V1 only
    (r"[a-c[x-z]]+|.", "abxyzd["),
    (r"[a||b]+|.", "a|b||"),
    (r"[&~]+|.", "a&&~~b"),
    # POSIX classes are ASCII in tiktoken
    (r"[[:alpha:]]+|.", "abé"),
    (r"[[:^alpha:]]+|.", "abé1"),
    (r"[[:word:][:punct:]]+|.", "a_1é!"),
    # end of text
    (r"\w+$|.", "abc\n"),
    (r"\w+\Z|.", "abc\n\n"),
    (r"\w+\z|.", "abc\n"),
    (r"(?m)^\w+$|.", "ab\ncd\n"),
    (r"\s++$|\s|\S+", "a b  \n"),
    # escapes the `regex` package does not know or reads differently
    (r"\x{41}+|\u{42}|\U{1F600}|\e|.", "AAB😀\x1bc"),
    (r"\h+|.", "0aF9g"),
    (r"(?<x>a)\k<x>|.", "aab"),
    (r"\b{start}\w+|.", "ab cd"),
    (r"\w+\b{end}|.", "ab cd"),
    (r"\<a|a\>|.", "a ba ab"),
    (r"[\b]|.", "\x08b"),
    # flags: tiktoken keeps them until the end of the pattern or of a (?flags:...) group
    (r"((?i)a)a|.", "AaAA"),
    (r"(?:(?i)a|b)c|.", "AcBcAC"),
    (r"(?i:a(?-i)b)b|.", "AbB AbbAB"),
    (r"a(?i)b|c|.", "aBC"),
    (r"(?x) a b # comment\n |.", "ab a b"),
    (r"(?x)[a b]+|.", "ab a b"),
    (r"(?#note)a|.", "ab"),
    (r"(?s).+", "a\nb"),
    # case folding: simple in tiktoken (V1 folds ß to ss); Kelvin sign and long s fold to k, s
    (r"(?i)ß|.", "ss SS ß ẞ"),
    (r"(?i)[sdmt]+|.", "SsſDdMmTtK"),
    (r"(?i)[a-z&&[^k]]+|.", "abK\u212akx"),
    (r"(?i)[^k]+|.", "K\u212akx"),
    (r"(?i)i+|I+|.", "iIİı"),
    (r"'(?i:[sdmt]|ll|ve|re)|\p{L}+|.", "I'M it'S we'LL"),
    # empty matches: tiktoken's engine skips one right after a match
    (r"\B|.", "ab"),
]


@pytest.mark.parametrize(("pattern", "text"), DIFFERENCES)
def test_split_as_tiktoken_splits(pattern, text):
    assert our_pieces(pattern, text) == tiktoken_pieces(pattern, text)


def test_the_issue_example_keeps_every_letter():
    base = tiktoken.get_encoding("cl100k_base")
    kw = dict(
        name="x", pat_str=r"[\p{Han}]+|[\p{L}&&[^\p{Han}]]+|\p{N}{1,3}|\s+|[^\s\p{L}\p{N}]+",
        mergeable_ranks=base._mergeable_ranks, special_tokens={},
    )
    text = "Download the ebook 你好世界 café 123456"
    ours = tiktoken_inc.Encoding(**kw).encode(text)
    assert ours == tiktoken.Encoding(**kw).encode(text)
    assert tiktoken_inc.Encoding(**kw).decode(ours) == text


# A pattern of the shape open models ship (class intersections, case-insensitive contractions).
KIMI_STYLE = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def _mixed_text(rng: random.Random, length: int) -> str:
    alphabet = "aZé你好世界ΑβЖ 1234567890'sT\n\t!?.,ـعربي한국어🙂\u0301\u3000"
    return "".join(rng.choice(alphabet) for _ in range(length))


def test_open_model_pattern_matches_tiktoken(corpus_texts):
    base = tiktoken.get_encoding("cl100k_base")
    ranks = base._mergeable_ranks
    ours = tiktoken_inc.Encoding("kimi-like", pat_str=KIMI_STYLE, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("kimi-like", pat_str=KIMI_STYLE, mergeable_ranks=ranks, special_tokens={})
    rng = random.Random(22)
    texts = [_mixed_text(rng, rng.randrange(1, 200)) for _ in range(300)] + corpus_texts
    for text in texts:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text[:80]


@pytest.fixture
def corpus_texts(request):
    """Up to 200 documents of each corpus, when ../shared/corpora is there (else none)."""
    from support import CORPORA_DIR

    texts: list[str] = []
    if CORPORA_DIR.is_dir():
        for path in sorted(CORPORA_DIR.glob("*.txt")):
            documents = path.read_text(encoding="utf-8").split("\n\n")
            texts += documents[:200]
    return texts


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(?U)a+", "the group"),
        (r"\R", "the escape \\R"),
        (r"a\Kb", "the escape \\K"),
        (r"\Ga", "the escape \\G"),
        (r"(?i)\p{Lu}", "a Unicode property under the case-insensitive flag"),
        (r"(?i)[é]", "beyond ASCII"),
        (r"\p{word}", "the property"),
    ],
)
def test_patterns_that_cannot_be_split_exactly_are_refused(pattern, reason):
    tiktoken.Encoding("ok", pat_str=pattern, mergeable_ranks=SINGLE_BYTES, special_tokens={})  # tiktoken takes it
    with pytest.raises(ValueError, match="cannot be split here exactly") as raised:
        tiktoken_inc.Encoding("no", pat_str=pattern, mergeable_ranks=SINGLE_BYTES, special_tokens={})
    assert reason in str(raised.value)


@pytest.mark.parametrize("pattern", ["(", r"(?-u:a)", r"[\d-z]", r"\p{NoSuchProperty}", r"\X"])
def test_patterns_tiktoken_rejects_raise_its_error(pattern):
    with pytest.raises(ValueError) as theirs:
        tiktoken.Encoding("bad", pat_str=pattern, mergeable_ranks=SINGLE_BYTES, special_tokens={})
    with pytest.raises(ValueError) as ours:
        tiktoken_inc.Encoding("bad", pat_str=pattern, mergeable_ranks=SINGLE_BYTES, special_tokens={})
    assert str(ours.value) == str(theirs.value)


def test_an_empty_piece_raises_where_tiktoken_panics():
    ours = tiktoken_inc.Encoding("empty", pat_str=r"a*|b", mergeable_ranks=SINGLE_BYTES, special_tokens={})
    theirs = tiktoken.Encoding("empty", pat_str=r"a*|b", mergeable_ranks=SINGLE_BYTES, special_tokens={})
    # a* takes "aa"; its empty match before "b" is skipped (and "b" with it), then it
    # matches "" at the end: tiktoken's BPE panics on that piece
    with pytest.raises(BaseException):
        theirs.encode_ordinary("aab")
    with pytest.raises(ValueError, match="matched the empty string at character 3"):
        ours.encode_ordinary("aab")


def _code_points_matching(pattern: str) -> set[int]:
    """Which code points a one-character class matches, by tiktoken: each candidate c is
    followed by \\x01 and gets a token c + \\x01, which only a matching c can produce."""
    found: set[int] = set()
    points = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    for start in range(0, len(points), 40000):
        chunk = [chr(cp) for cp in points[start:start + 40000]]
        ranks = dict(SINGLE_BYTES)
        ranks.update({char.encode() + b"\x01": 256 + i for i, char in enumerate(chunk)})
        enc = tiktoken.Encoding("probe", pat_str=f"(?:{pattern})\\x01|(?s:.)", mergeable_ranks=ranks, special_tokens={})
        text = "".join(char + "\x01" for char in chunk)
        found |= {ord(enc.decode_single_token_bytes(t)[:-1].decode()) for t in enc.encode_ordinary(text) if t >= 256}
    return found


@pytest.mark.parametrize("pattern", [r"\p{Cn}", r"\w", r"[\p{L}&&[^\p{Han}]]", r"(?i)[a-z]"])
def test_classes_agree_on_every_code_point(pattern):
    """Every code point, classified by tiktoken and by the translated pattern on the text as
    the splitter prepares it (code points tiktoken's tables do not know replaced)."""
    from tiktoken_inc._corebpe import _stand_ins, compile_pattern

    stand_ins = _stand_ins()
    table = stand_ins.table if stand_ins is not None else {}
    compiled = compile_pattern(f"(?:{pattern})\\z")
    ours = {
        cp for cp in range(0x110000)
        if not 0xD800 <= cp < 0xE000 and compiled.match(chr(cp).translate(table))
    }
    theirs = _code_points_matching(pattern)
    assert sorted(ours ^ theirs) == []


def test_translation_example():
    assert to_regex(r"\w+$") == "(?V1-f)\\w+\\Z"
