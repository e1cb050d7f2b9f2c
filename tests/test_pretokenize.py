"""The C pre-tokenizer (`pretokenize`) and one-call `encode_text` against tiktoken.

The reference is tiktoken's own split (its Rust regex and Unicode tables), not the `regex`
package: the two disagree on code points assigned in recent Unicode versions, and a drop-in
replacement must follow tiktoken.  tiktoken does not expose its pieces, so a split is checked
through what it determines: `encode_text(pattern, text)` must equal tiktoken's
`encode_ordinary(text)`, and the pieces of `pretokenize` encoded one by one with tiktoken's
per-piece BPE must give the same ids.  Every code point is tried in several contexts (letter
case, digits, spaces, contractions); on text made of long-stable characters the pieces must
also equal `regex.findall(pat_str, text)` exactly.
"""
from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tiktoken_inc._native import pretokenize
from tiktoken_inc._unicode_compat import RECLASSIFIED_IN_TIKTOKEN, UNASSIGNED_IN_TIKTOKEN
from tiktoken_inc._tki import lib

PATTERNS = {
    "r50k_base": lib.TKI_PATTERN_R50K,
    "cl100k_base": lib.TKI_PATTERN_CL100K,
    "o200k_base": lib.TKI_PATTERN_O200K,
}
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def context(char: str) -> str:
    """One code point among letters of both cases, digits, spaces and a contraction."""
    return f"a{char}A{char}a 1{char} {char}x{char}'s{char}  {char}\n"


@pytest.fixture(scope="module", params=list(PATTERNS))
def setup(request, native_vocab, reference):
    name = request.param
    return name, PATTERNS[name], native_vocab(name), reference(name)


def differing_chars(pattern, vocab, enc, text: str) -> list[str]:
    """The characters of `text` whose context() encodes differently from tiktoken."""
    out = []
    for char in sorted(set(text)):
        one = context(char).encode("utf-8")
        if vocab.encode_text(pattern, one)[0] != enc.encode_ordinary(context(char)):
            out.append(char)
    return out


def check_text(pattern, vocab, enc, text: str) -> None:
    """encode_text and the pretokenize pieces (re-encoded by tiktoken) give tiktoken's ids;
    the reported last-piece token count is right."""
    data = text.encode("utf-8")
    want = enc.encode_ordinary(text)
    pieces = pretokenize(pattern, data)
    assert b"".join(pieces) == data
    by_piece = [t for piece in pieces for t in enc._encode_single_piece(piece)]
    got, last = vocab.encode_text(pattern, data)
    assert by_piece == want, f"split differs from tiktoken's; code points: {differing_chars(pattern, vocab, enc, text)[:20]}"
    assert got == want
    assert last == (len(enc._encode_single_piece(pieces[-1])) if pieces else 0)


def _ranges(chars: list[str]) -> str:
    spans: list[list[int]] = []
    for c in map(ord, chars):
        if spans and spans[-1][1] == c - 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ", ".join(f"U+{a:04X}" + (f"..U+{b:04X}" if b > a else "") for a, b in spans)


def test_every_code_point(setup):
    """Every Unicode scalar value, in context: encode_text and the pieces agree with tiktoken."""
    name, pattern, vocab, enc = setup
    step = 4096
    bad: list[str] = []
    for start in range(0, len(CODE_POINTS), step):
        text = "".join(context(chr(c)) for c in CODE_POINTS[start : start + step])
        if vocab.encode_text(pattern, text.encode("utf-8"))[0] != enc.encode_ordinary(text):
            bad += differing_chars(pattern, vocab, enc, text)
        else:
            check_text(pattern, vocab, enc, text)
    assert not bad, f"{len(bad)} code points split unlike tiktoken: {_ranges(bad)[:1500]}"


STABLE = (
    "abcxyzABCXYZ éüßÆĳ ΑΒΓαβγ ЖжЁё ǅǈǋ ʰˆ ªº 中文日本語 가나 \u0301\u0300\u0903 0123456789 ٣²½ "
    "'’\"!?.,;:-_/\\<|>{}()[]#@$%^&*+=~` \t\r\n\u000b\u000c\u00a0\u2003\u3000\u200b\u2028\u0085"
)
stable_text = st.lists(
    st.one_of(st.sampled_from(STABLE), st.sampled_from(["'s", "'T", "'re", "'VE", "'m", "'ll", "'D", "\r\n", "  "])),
    max_size=60,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=stable_text)
def test_pieces_equal_regex_on_stable_characters(text, setup):
    """On long-assigned characters the pieces equal regex.findall(pat_str, text) exactly."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.findall(enc._pat_str, text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want
    assert vocab.encode_text(pattern, text.encode("utf-8"))[0] == enc.encode_ordinary(text)


#: Runs of ASCII letters beside what can end or extend them: non-ASCII letters and marks
#: (a word that goes on past ASCII), contractions, prefix characters, digits, the end.
ascii_word_text = st.lists(
    st.sampled_from(
        ["the", "The", "THE", "x", "Q", "hello", "HeLLo", "ABCdef", " ", "  ", "\n", "\r\n", "\t", ".", ",",
         "-", "'", "'s", "'S", "'ll", "'Re", "'ve", "'d", "'m", "'t", "1", "123", "é", "É", "ǅ", "ʰ", "ª",
         "\u0301", "中", "\u00a0", "’"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=ascii_word_text)
def test_pieces_equal_regex_on_ascii_words(text, setup):
    """Words of ASCII letters (the pre-tokenizer's byte-level shortcut) and their edges:
    the pieces equal regex.findall(pat_str, text), also with the text cut anywhere."""
    name, pattern, vocab, enc = setup
    for cut in {len(text), len(text) // 2, max(len(text) - 1, 0)}:
        head = text[:cut]
        want = [m.encode("utf-8") for m in regex.findall(enc._pat_str, head)]
        assert pretokenize(pattern, head.encode("utf-8")) == want


#: Characters that reach every decision of the ASCII shortcut (csrc/pretokenize_ascii.h):
#: both cases, the contraction letters, a digit, each kind of whitespace (0x1C is \s too),
#: the apostrophe, punctuation, o200k's "/", and a non-ASCII letter that makes it defer.
SHORTCUT_ALPHABET = ["a", "Z", "s", "l", "e", "5", " ", "\t", "\n", "\r", "\x1c", "'", ".", "/", "é"]


def test_pieces_equal_regex_exhaustively_on_short_text(setup):
    """Every text of up to four characters over SHORTCUT_ALPHABET, every pair of ASCII
    characters before a letter, a digit and a space, and runs about as long as the most the
    shortcut reads (64 bytes, then it defers): the pieces equal regex.findall."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    texts = [""]
    for _ in range(4):
        texts = [t + c for t in texts for c in SHORTCUT_ALPHABET]
        for text in texts:
            want = [m.encode("utf-8") for m in compiled.findall(text)]
            assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)
    for first in range(128):
        for second in range(128):
            for tail in ("x", "7", " "):
                text = chr(first) + chr(second) + tail
                want = [m.encode("utf-8") for m in compiled.findall(text)]
                assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)
    for length in range(60, 68):
        for unit, before, after in [("a", " ", "."), ("Ab", "(", " "), ("9", " ", "x"), ("!", " ", "\n/a"),
                                    (" ", "a", "b"), ("\t ", ".", "1")]:
            text = before + unit * length + after + " end"
            want = [m.encode("utf-8") for m in compiled.findall(text)]
            assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


#: What decides a piece start at the edge of a 64-byte window (csrc/pretokenize_block.h):
#: contractions (their two or three bytes after the apostrophe; o200k joins them to the word
#: before; U+017F folds to "s"), whitespace runs and their CR/LF, digits in threes, o200k's
#: "[\r\n/]*" after punctuation, a capital after a small letter, non-ASCII bytes.
WINDOW_TAILS = ["'s", "'ll", "'LL", "'re", "x's", "x'sy", " 's", "''s", "'\u017f", "x'\u017fa", "  \n  x",
                "\n\n \t", " \n", "1234567", "aB", "ABc", ".\n/\n.", ".\n\n  ", "é", "中", "\u00a0 ",
                "  é", "  ", "\t\t", "'"]


def test_pieces_equal_regex_across_windows(setup):
    """Each of WINDOW_TAILS after fillers of 40 to 79 characters, so that it meets a window's
    edge at every offset, with text after it and ending the text: the pieces equal
    regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    for filler in ["a", "ab ", " ", "1 ", ". ", "A"]:
        for length in range(40, 80):
            for tail in WINDOW_TAILS:
                for after in ("", " z", "x y"):
                    text = (filler * length)[:length] + tail + after
                    want = [m.encode("utf-8") for m in compiled.findall(text)]
                    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


#: Texts of a few hundred bytes, mostly ASCII: many windows, each starting where the last
#: piece it handed out starts.
windowed_text = st.lists(
    st.sampled_from(
        ["the", " the", "The", "THE", "aB", "x", "  ", " ", "\n", "\r\n", "\t", " \n ", ".", ",", "-", "(", "/",
         "'", "'s", "'S", "'ll", "'Re", "1", "12", "123", "1234", "é", "中", "\u00a0", "\x0b", ".\n", "//"]
    ),
    min_size=20,
    max_size=160,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=windowed_text)
def test_pieces_equal_regex_on_long_ascii_text(text, setup):
    """Mostly-ASCII text over several windows: the pieces equal regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.findall(enc._pat_str, text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want


#: Whitespace runs of every ASCII space byte, long enough to cross several sixteen-byte
#: blocks (match_whitespace takes whole blocks at a compare, the rest a byte at a time), with
#: their last CR/LF anywhere, beside Unicode spaces and what ends a run.
whitespace_run_text = st.lists(
    st.tuples(st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\r\n", "\u00a0", "\u3000", "\u2028"]),
              st.integers(1, 40)).map(lambda unit: unit[0] * unit[1])
    | st.sampled_from(["a", "A", ".", "1", "'s", "中"]),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=whitespace_run_text)
def test_pieces_equal_regex_on_long_whitespace_runs(text, setup):
    """Long runs of mixed whitespace: the pieces equal regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.findall(enc._pat_str, text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


#: Runs of one multi-byte character (the scans skip whole copies of the character before
#: them) of every class the scans take, beside characters that share its first bytes, so
#: that a copy is cut short at each byte: letters of both cases, marks, CJK, emoji, symbols.
repeated_char_text = st.lists(
    st.tuples(
        st.sampled_from(["é", "É", "ж", "Ж", "ǅ", "ʰ", "\u0301", "中", "丰", "丫", "😀", "😁", "🙂", "€", "…", "’",
                         "\u00a0", "a", "A", " ", "1", "'s", "\n"]),
        st.integers(1, 40),
    ).map(lambda unit: unit[0] * unit[1]),
    max_size=8,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=repeated_char_text)
def test_pieces_equal_regex_on_runs_of_one_character(text, setup):
    """Runs of one multi-byte character, cut anywhere (also inside a character's UTF-8):
    the pieces equal regex.findall(pat_str, text), and encode_text equals tiktoken."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.findall(enc._pat_str, text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want
    check_text(pattern, vocab, enc, text)
    data = text.encode("utf-8")
    for cut in {len(data) - 1, len(data) - 2, len(data) // 2}:
        if cut > 0:
            assert b"".join(pretokenize(pattern, data[:cut])) == data[:cut]


#: Words of two- and three-byte letters and marks of every class that o200k's U*W+ and
#: U+W* tell apart (Lu, Ll, Lt, Lm, Lo, Mn, Mc), beside what ends or extends them: ASCII
#: letters, four-byte letters, digits of other scripts, prefix characters, contractions,
#: spaces, and the end of the text (the scans of wide words decide only away from it).
wide_word_text = st.lists(
    st.sampled_from(
        ["ж", "Ж", "жж", "ЖЖ", "ǅ", "ʰ", "ª", "ᴬ", "中", "가", "\u0301", "\u0903", "é", "É", "a", "A", "𝐀", "𝐚",
         "٣", "Ⅸ", "'s", "'S", "'ll", "'", " ", "  ", "«", "—", "1", "\u00a0", "\n", ".", "’"]
    ),
    max_size=24,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(text=wide_word_text)
def test_pieces_equal_regex_on_wide_words(text, setup):
    """Words of non-ASCII letters (o200k's one-pass scan of wide words) and their edges: the
    pieces equal regex.findall(pat_str, text), also with the text cut short."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    for cut in {len(text), len(text) - 1, len(text) - 2, len(text) // 2}:
        head = text[: max(cut, 0)]
        want = [m.encode("utf-8") for m in compiled.findall(head)]
        assert pretokenize(pattern, head.encode("utf-8")) == want, repr(head)


#: What the 64-byte windows classify beyond ASCII (csrc/pretokenize_block.h: one bit per
#: character) and what they leave to the per-piece matcher, in texts of a few windows:
#: ideographs (at once), CJK and other punctuation, wide digits and spaces, letters of every
#: class o200k tells apart (Lu, Ll, Lt, Lm, Lo; an ideograph or Lm right before a capital),
#: marks, four-byte characters, U+017F after an apostrophe, and ASCII around them.
wide_window_text = st.lists(
    st.sampled_from(
        ["中", "中文", "汉字很好", "䷀", "，", "。", "、", "“", "”", "《", "）", "…", "—", "１", "１２３４", "Ａ", "ｂ",
         "é", "É", "ß", "Привет", "П", "ж", "αβ", "ǅ", "ʰ", "ª", "カタカナ", "ひらがな", "ー", "한국", "٣", "Ⅸ",
         "\u00a0", "\u3000", "\u2028", "\u0085", "\u0301", "\u093f", "क", "😀", "𠀀", "ſ", "'ſ", "K", "中A",
         "中Ab", "ʰB", "the", " the", "The", "ABC", "aB", "'s", "'S", "'ll", " ", "  ", "\n", "\r\n", "1", "123",
         ".", "/", "!", "'", "\t"]
    ),
    min_size=10,
    max_size=120,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(text=wide_window_text)
def test_pieces_equal_regex_in_windows_of_wide_characters(text, setup):
    """Texts of several windows mixing wide characters of every kind with ASCII: the pieces
    equal regex.findall(pat_str, text), also with the text cut short."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    for cut in {len(text), len(text) - 1, len(text) // 2}:
        head = text[: max(cut, 0)]
        want = [m.encode("utf-8") for m in compiled.findall(head)]
        assert pretokenize(pattern, head.encode("utf-8")) == want, repr(head)


#: Two-byte characters of the scripts the windows classify sixteen code points at a time (Latin
#: supplements, Greek, Cyrillic, Armenian, Hebrew, Arabic), with what splits their letters.
TWO_BYTE_STABLE = [chr(c) for c in range(0x80, 0x800)
                   if c not in RECLASSIFIED_IN_TIKTOKEN and not any(a <= c <= b for a, b in UNASSIGNED_IN_TIKTOKEN)]
TWO_BYTE_TEXT = st.lists(
    st.one_of(st.sampled_from(TWO_BYTE_STABLE),
              st.sampled_from(["ſ", "'s", "'S", " ", "  ", "\n", "a", "A", "1", "٣", ".", "中", "\u0301", "😀",
                               "ЖжЖж", "Привет", "ΑλφαΒήτα", "ÄäÖö", "ԱբԳ", "שלום", "سلام"])),
    min_size=20, max_size=200,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TWO_BYTE_TEXT)
def test_pieces_equal_regex_on_two_byte_scripts(text, setup):
    """Text of two-byte characters of every kind (those both Unicode versions class alike)
    across several windows, mixed with what stops or splits their runs: the pieces equal
    regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.compile(enc._pat_str).findall(text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


#: Marks (\p{M}) of two and three bytes, and what can stand next to them: letters of several
#: scripts and cases, wide and ASCII numbers and spaces, and the O characters after which
#: o200k_base's pattern may take a mark into a run of O (" ?[^\s\p{L}\p{N}]+": "((" then a
#: mark) instead of a word; with the other patterns a mark is O itself.  Three-byte
#: characters of every class too (kana, Hangul, fullwidth forms, spaces, numbers).
MARKS = ["\u0301", "\u0308", "\u05b4", "\u064e", "\u093f", "\u094d", "\u0e31", "\u0e48", "\u3099",
         "\u20d7", "\ufe0f"]
MARK_NEIGHBOURS = ["क", "ख", "ก", "a", "A", "é", "Ж", "中", "カ", "한", "ー", "Ａ", "ｂ", "１", "Ⅸ", "\u3000",
                   "\u2028", "\u0085", "(", "((", "/", "'", "'s", "，", "।", " ", "  ", "\t", "\n", "\r\n",
                   "1", "१२३", "!", "नमस्ते", "किताब", "ภาษาไทย", "ಕನ್ನಡ", "か\u3099", "e\u0301"]
MARK_TEXT = st.lists(st.sampled_from(MARKS + MARK_NEIGHBOURS), min_size=10, max_size=120).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=MARK_TEXT)
def test_pieces_equal_regex_around_marks(text, setup):
    """Marks next to letters, numbers, spaces and O characters, with three-byte characters of
    every class, across several windows: the pieces equal regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    want = [m.encode("utf-8") for m in regex.compile(enc._pat_str).findall(text)]
    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


def test_pieces_equal_regex_for_each_mark_after_each_neighbour(setup):
    """Each mark right after each neighbour, followed by nothing, a letter, an O character, a
    space or another mark, after 40 to 65 bytes of ASCII (so that it meets a 64-byte window's
    edge at every offset) and after Devanagari words: the pieces equal
    regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    fillers = [("ab c. " * 12)[:length] for length in range(40, 66)] + ["नमस्ते " * 4, "नमस्ते, " * 3]
    for mark in MARKS:
        for before in MARK_NEIGHBOURS:
            for after in ("", "क", "(", " x", mark):
                tail = before + mark + after
                for filler in fillers:
                    text = filler + tail
                    want = [m.encode("utf-8") for m in compiled.findall(text)]
                    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


#: Wide characters that meet a window's edge at every offset after the fillers below.
WIDE_WINDOW_TAILS = ["中A", "中Ab", "中AB c", "A中b", "A中B", "ǅ中", "ʰAb", "，中", "，，中", " 中", "\u00a0中",
                     "\u3000\u3000x", "１２３４５", "x'ſ", "'ſ", "中'S", "中's", "é'll", "\u0301中", "😀中", "中\n\n",
                     "。\n/", "中 ", "中  ", "Ж", "жЖ", "一", "䷀"]


def test_pieces_equal_regex_across_windows_of_wide_characters(setup):
    """Each of WIDE_WINDOW_TAILS after fillers of wide characters, long enough that it meets a
    window's edge at every offset, with text after it and ending the text: the pieces equal
    regex.findall(pat_str, text)."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    for filler in ["中", "中文，", "é", "ж ", "ab中", "１", "， "]:
        for length in range(12, 66):
            for tail in WIDE_WINDOW_TAILS:
                for after in ("", " z", "x y", "中"):
                    text = (filler * length)[:length] + tail + after
                    want = [m.encode("utf-8") for m in compiled.findall(text)]
                    assert pretokenize(pattern, text.encode("utf-8")) == want, repr(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_random_text_any_code_point(text, setup):
    """Random text over all of Unicode: encode_text == tiktoken encode_ordinary."""
    name, pattern, vocab, enc = setup
    check_text(pattern, vocab, enc, text)


def test_corpora_encode_text(setup, corpora):
    """Each corpus file in one encode_text call equals tiktoken's encode_ordinary."""
    name, pattern, vocab, enc = setup
    for path in sorted(corpora.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        assert vocab.encode_text(pattern, text.encode("utf-8"))[0] == enc.encode_ordinary(text), path.name


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=60))
def test_invalid_utf8_never_crashes(data):
    """Arbitrary bytes: a ValueError or pieces that cover the input exactly, never a crash."""
    for pattern in PATTERNS.values():
        try:
            pieces = pretokenize(pattern, data)
        except ValueError:
            continue
        assert b"".join(pieces) == data


#: The byte sequences around the CJK ideographs that the pre-tokenizer recognises from their
#: bytes (U+4000..U+4DBF, U+4E00..U+9FFF: csrc/pretokenize_tables.h): both ends of each
#: range, the hexagram symbols between them (lead byte 0xE4, second byte 0xB7), the code
#: points just outside, kana, Hangul, and what a run of them meets: ASCII letters, digits,
#: spaces, punctuation of both widths, and sequences that are not valid UTF-8 (cut short,
#: a bad continuation, a lone continuation byte, an overlong form, a surrogate).
IDEOGRAPH_FRAGMENTS = [
    "\u4000", "\u4dbf", "\u4dc0", "\u4dff", "\u4e00", "\u4e2d", "\u9fff", "\ua000", "\u3fff", "\u3042", "\u30fc",
    "\uac00", "\u3002", "\uff0c", "\u2500", "a", "Z", "7", " ", "\n", ",", "'s", "é", "\U0001d400",
]
IDEOGRAPH_BAD_BYTES = [b"\xe4\xb8", b"\xe9", b"\xe4\xb8\x41", b"\xe5\xc0\x80", b"\x80", b"\xbf\xbf",
                       b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xe4\xb7\x80", b"\xf0\x9f"]


def _split_bytes_by_regex(compiled, data: bytes) -> list[bytes]:
    """regex.findall on `data`, each byte that starts no valid UTF-8 sequence taken as one
    character of no class (a private-use stand-in), as the C pre-tokenizer takes it."""
    chars: list[str] = []
    widths: list[int] = []
    at = 0
    while at < len(data):
        for width in (1, 2, 3, 4):
            try:
                char = data[at : at + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            char, width = "\ue000", 1
        chars.append(char)
        widths.append(width)
        at += width
    pieces, at, index = [], 0, 0
    for match in compiled.findall("".join(chars)):
        size = sum(widths[index : index + len(match)])
        pieces.append(data[at : at + size])
        at += size
        index += len(match)
    return pieces


ideograph_bytes = st.lists(
    st.one_of(st.sampled_from(IDEOGRAPH_FRAGMENTS).map(lambda s: s.encode("utf-8")),
              st.sampled_from(IDEOGRAPH_BAD_BYTES)),
    max_size=30,
).map(b"".join)


@settings(max_examples=600, deadline=None)
@given(data=ideograph_bytes, padding=st.integers(0, 70))
def test_pieces_equal_regex_around_ideographs(data, padding, setup):
    """Runs of ideographs and their neighbours, valid or not, after 0 to 70 bytes of ASCII (so
    that they meet a 64-byte window's edge at every offset), cut short too: the pieces equal
    regex.findall(pat_str, text) with each invalid byte one character of no class."""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    text = (b"ab c. " * 12)[:padding] + data
    for cut in {len(text), len(text) - 1, len(text) - 2}:
        head = text[: max(cut, 0)]
        assert pretokenize(pattern, head) == _split_bytes_by_regex(compiled, head), repr(head)


def test_pieces_equal_regex_after_runs_of_ideographs(setup):
    """A run of 0 to 17 different ideographs ended by each fragment and invalid sequence
    above, after four leads and cut short: the pieces equal regex.findall(pat_str, text)
    with each invalid byte one character of no class.  (The random runs above are rarely
    longer than a few characters; a scan that takes several characters at a test must end
    them at the right one wherever in its stride the stopper falls.)"""
    name, pattern, vocab, enc = setup
    compiled = regex.compile(enc._pat_str)
    stoppers = [f.encode("utf-8") for f in IDEOGRAPH_FRAGMENTS] + IDEOGRAPH_BAD_BYTES
    ideographs = "\u4e2d\u4000\u9fff\u4dbf\u6587\u4e00"
    for count in range(18):
        run = "".join(ideographs[i % len(ideographs)] for i in range(count)).encode("utf-8")
        for stopper in stoppers:
            for lead in (b"", b"a", b" x", b"\xe4\xb8\xad\xe6"):
                text = lead + run + stopper + b"\xe6\x96\x87" * 6
                for cut in {len(text), len(lead) + len(run) + len(stopper), len(text) - 1}:
                    head = text[:cut]
                    assert pretokenize(pattern, head) == _split_bytes_by_regex(compiled, head), repr(head)
