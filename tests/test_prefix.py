"""All-prefix access (tiktoken_inc/prefix.py) and token healing, against brute force.

- without pre-splitting: for every byte end i of random texts (cuts inside characters
  included), `last_token(i)` and `encode(i)` equal tiktoken's `_encode_single_piece` of the
  prefix;
- with pre-splitting: `encode(n)` equals tiktoken's `encode_ordinary(prefix)` at every
  character boundary, and `last_token(i)` equals its documented definition (the BPE of the
  whole text's regex piece cut at i), checked by brute force;
- a vocabulary with non-canonical tokens (tiktoken's whole-piece shortcut), the cache, errors;
- `heal`: kept tokens + regenerated text give back the prompt, and the kept tokens start the
  encoding of the prompt followed by random continuations (special-token fragments too).
"""
from __future__ import annotations

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
from support import MAIN_ENCODINGS

ALPHABET = list("aZéß'’ \t\r\n\u00a0\u3000中文字0123456789!?.sStTdDmMlLvVrReE") + [
    "😀", "'re", "'ll", "    ", "\n\n", " they'r", "don'", "<|endoftext|>", "<|", "|>", "<|endoftext",
]
texts = st.lists(st.sampled_from(ALPHABET), max_size=20).map("".join)


@pytest.fixture(scope="module")
def pairs(reference):
    return [(name, reference(name)) for name in MAIN_ENCODINGS]


@settings(max_examples=250, deadline=None)
@given(text=texts)
def test_no_regex_every_byte_prefix(pairs, text):
    data = text.encode()
    for name, theirs in pairs:
        enc = tiktoken_inc.get_encoding(name, pretokenize=False)
        index = enc.prefix_index(data)
        last_tokens = enc.prefix_last_tokens(data)
        assert len(index) == len(data) == len(last_tokens)
        assert index.encode(0) == []
        for i in range(1, len(data) + 1):
            want = theirs._encode_single_piece(data[:i])
            assert index.encode(i) == want, (name, data, i)
            assert index.last_token(i) == want[-1], (name, data, i)
            assert last_tokens[i - 1] == (want[-1], len(theirs.decode_single_token_bytes(want[-1])))


@settings(max_examples=250, deadline=None)
@given(text=texts)
def test_regex_prefixes(pairs, text):
    data = text.encode()
    for name, theirs in pairs:
        enc = tiktoken_inc.get_encoding(name)
        index = enc.prefix_index(text)
        pieces = enc._core_bpe._find(text)
        starts, position = [], 0  # the whole text's piece start for every byte end
        for piece in pieces:
            size = len(piece.encode())
            starts += [position] * size
            position += size
        for i in range(1, len(data) + 1):
            # last_token: the BPE of the whole text's piece cut at i (its documented definition)
            assert index.last_token(i) == theirs._encode_single_piece(data[starts[i - 1]:i])[-1], (name, text, i)
        for n in range(len(data) + 1):
            if n < len(data) and data[n] & 0xC0 == 0x80:
                with pytest.raises(ValueError, match="inside a UTF-8 character"):
                    index.encode(n)
                continue
            assert index.encode(n) == theirs.encode_ordinary(data[:n].decode()), (name, text, n)
            assert enc.encode_prefix(text, n) == index.encode(n)


def test_regex_last_tokens_in_long_runs_of_digits(reference):
    """A long run of ASCII digits is cut into threes without the pre-tokenizer (cl100k_base,
    o200k_base): its threes' steps, repeated, from the memo or stepped, are every prefix's."""
    digits = "31415926535897932384626433832795028841971693993751058209749445923078164062862089986"
    for name in ("cl100k_base", "o200k_base"):
        enc, theirs = tiktoken_inc.get_encoding(name), reference(name)
        for n in (23, 24, 25, 26, 40, 81):
            for run in ((digits * 2)[:n], "7" * n, ("123" * n)[:n], ("1234" * n)[:n]):
                for text in (run, "x" + run + " y", run + "٣" + run, " " + run + "!"):
                    data = text.encode()
                    index = enc.prefix_index(text)
                    starts, position = [], 0
                    for piece in enc._core_bpe._find(text):
                        size = len(piece.encode())
                        starts += [position] * size
                        position += size
                    for i in range(1, len(data) + 1):
                        want = theirs._encode_single_piece(data[starts[i - 1]:i])[-1]
                        assert index.last_token(i) == want, (name, text, i)
                    assert index.encode(len(data)) == theirs.encode_ordinary(text)


def test_where_regex_last_token_differs():
    """The documented difference: the prefix's own split depends on what follows."""
    enc = tiktoken_inc.get_encoding("r50k_base")
    text = " they're"
    index = enc.prefix_index(text)
    # " they'r" alone splits as [" they", "'", "r"]; in the whole text "'re" is one piece.
    assert enc.encode_ordinary(" they'r") == index.encode(7)
    assert index.encode(7)[-1] == enc.encode_single_token("r")
    assert index.last_token(7) == enc._encode_single_piece("'r")[-1]


def test_noncanonical_vocabulary(reference):
    """A prefix that is itself a non-canonical token is that token (the whole-piece shortcut)."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"xyz": 257, b"abc d": 258}
    ours = tiktoken_inc.Encoding("toy", pat_str=None, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("toy", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    for text in ["xyz", "xyzxyz", "abc d", "abc dab", "ab xyz"]:
        data = text.encode()
        index = ours.prefix_index(data)
        for i in range(1, len(data) + 1):
            want = theirs._encode_single_piece(data[:i])
            assert index.encode(i) == want and index.last_token(i) == want[-1], (text, i)
    regex_ours = tiktoken_inc.Encoding("toy", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    index = regex_ours.prefix_index("ab xyz xy")
    assert [index.encode(n) for n in (3, 6, 9)] == [theirs.encode_ordinary(t) for t in ("ab ", "ab xyz", "ab xyz xy")]


def test_cache_and_errors():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text = "the same text, asked twice"
    assert enc.prefix_index(text) is enc.prefix_index(text)
    index = enc.prefix_index(text)
    with pytest.raises(IndexError):
        index.last_token(0)
    with pytest.raises(IndexError):
        index.encode(len(text) + 1)
    with pytest.raises(ValueError, match="must be UTF-8"):
        enc.prefix_index(b"\xff abc")
    assert tiktoken_inc.get_encoding("cl100k_base", pretokenize=False).prefix_index(b"\xff abc").encode(2) == [
        enc.encode_single_token(b"\xff"), enc.encode_single_token(b" ")
    ]
    improper = {bytes([b]): b for b in range(256)} | {b"ab": 257, b"bc": 256, b"abc": 258}  # improper
    heap = tiktoken_inc.Encoding("heap", pat_str=None, mergeable_ranks=improper, special_tokens={})
    if not heap.incremental:
        with pytest.raises(ValueError, match="incremental core"):
            heap.prefix_index("abc")


def test_cache_by_equal_text_and_type():
    """The cache finds an equal text that is another object, keeps str and bytes apart,
    holds the last four texts, and indexes a mutable buffer afresh each time (once it
    raised TypeError: a bytearray has no hash)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text = "x" + "an equal text" * 3
    again = text[:1] + text[1:]  # equal, another object
    assert again is not text and enc.prefix_index(again) is enc.prefix_index(text)
    assert enc.prefix_index(text.encode()) is not enc.prefix_index(text)
    assert enc.prefix_index(text.encode()).encode(5) == enc.prefix_index(text).encode(5)
    kept = enc.prefix_index(text)
    for k in range(4):
        enc.prefix_index(f"filler {k}")
    assert enc.prefix_index(text) is not kept  # pushed out by four others, made again
    buffer = bytearray(b"hello world")
    first = enc.prefix_index(buffer)
    buffer[:5] = b"HELLO"
    second = enc.prefix_index(buffer)
    assert first.encode(11) == enc.encode_ordinary("hello world")
    assert second.encode(11) == enc.encode_ordinary("HELLO world")


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_pass_memo_starts_afresh_exactly(name, reference):
    """Pieces that keep replacing each other in the pass's memo (two words whose ranks share
    a slot, alternating) fill its arena again and again over 2.5 MB: every last token equals
    the memo-free pass over one period (texts under 4 KiB have no memo), and prefixes at
    random ends equal tiktoken's encode_ordinary."""
    import random

    enc, theirs = tiktoken_inc.get_encoding(name), reference(name)
    words = {}
    for rank in range(1000, 60000):
        token = enc.decode_single_token_bytes(rank)
        partner = rank + (1 << 16)
        if token[:1] == b" " and token[1:].isalpha() and partner < enc.max_token_value:
            other = enc.decode_single_token_bytes(partner)
            if other[:1] == b" " and other[1:].isalpha() and len(token) > 3 and len(other) > 3:
                words = (token.decode(), other.decode())
                break
    assert words, "no two word tokens 2**16 ranks apart"
    period = "".join(words) + " ab" * 3
    assert [enc.encode_single_token(w) for w in words] == list(enc.encode_ordinary("".join(words)))
    text = period * ((5 << 19) // len(period))
    index = enc.prefix_index(text)
    one = list(enc.prefix_index(period + period)._last)[1 : len(period) + 1]
    assert list(index._last[1:]) == one * (len(text) // len(period))
    rng = random.Random(0)
    for end in [len(text)] + rng.sample(range(len(text)), 5):
        assert index.encode(end) == theirs.encode_ordinary(text[:end]), end


def assert_pass_is_each_piece_alone(enc, text):
    """The pass over `text` equals, piece by piece, the pass over that piece alone."""
    vocab = enc._core_bpe._vocab
    last = enc.prefix_index(text)._last
    start = 0
    for piece in enc._core_bpe._find(text):
        size = len(piece.encode())
        want = vocab.prefix_last_tokens(piece.encode())
        assert list(last[start + 1 : start + size + 1]) == want, (enc.name, start, piece)
        start += size
    assert start == len(text.encode())


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
def test_long_pieces_stepped_into_the_output(name, reference):
    """Pieces over 512 bytes are stepped straight into the pass's output, the entry before
    them borrowed (for the first piece, the slot before the output, which Python's array
    has): at the start of the text, after other pieces, one after another, the whole text
    without the pre-split, and with the C call given no slot (then the steps are copied).  Each piece's last tokens equal the
    pass over that piece alone, and prefixes equal tiktoken's encode_ordinary."""
    from tiktoken_inc._tki import ffi, lib

    enc, theirs = tiktoken_inc.get_encoding(name), reference(name)
    vocab = enc._core_bpe._vocab
    texts = [
        " " * 3000 + "x",
        "\n" * 2000,
        "a" * 1500 + " " + "b" * 700 + "\n\n" + " " * 900 + "end",
        "hi there " + "中" * 400 + " and " + "z" * 5000,
    ]
    for text in texts:
        data = text.encode()
        index = enc.prefix_index(text)
        assert index._last[0] == 0
        assert_pass_is_each_piece_alone(enc, text)
        no_slot = ffi.new("uint32_t[]", len(data))
        status = lib.tki_prefix_pass(vocab._vocab, enc._core_bpe._pattern, ffi.from_buffer(data), len(data), 0, no_slot)
        assert status == lib.TKI_OK and ffi.unpack(no_slot, len(data)) == list(index._last[1:])
        for end in (1, 2, 511, 600, len(text) // 2, len(text) - 1, len(text)):
            assert index.encode(len(text[:end].encode())) == theirs.encode_ordinary(text[:end]), (name, end)
        # Without the pre-split the text is one piece, stepped into the output the same way.
        whole = tiktoken_inc.get_encoding(name, pretokenize=False).prefix_index(text)
        assert whole._last[0] == 0
        assert list(whole._last[1:]) == vocab.prefix_last_tokens(data), name
        for end in (1, 600, len(data) // 2, len(data)):
            assert whole.encode(end) == theirs._encode_single_piece(data[:end]), (name, end)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_pass_memo_hits_equal_each_piece_alone(name):
    """Over 4 KiB the pass copies the steps of a token piece it has seen, eight at a time
    for a piece of up to eight bytes (the extra ones belong to the pieces after it): text of
    repeated words of every length, digits and punctuation, ending in pieces met before
    with fewer than eight bytes left, equals each piece's own pass."""
    import random

    rng = random.Random(5)
    enc = tiktoken_inc.get_encoding(name)
    words = [" a", " of", " the", " that", " which", " through", " different", "ly", ",", ".\n",
             " 1", "23", " ä", "中", " 🙂", "\n\n", "  ", " extraordinarily", "'s", "!"]
    for ending in ("", " a", " of the", ".", " that"):
        text = "".join(rng.choice(words) for _ in range(3000)) + ending
        assert len(text.encode()) > 4096
        assert_pass_is_each_piece_alone(enc, text)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_pass_memo_of_pieces_that_are_no_token(name):
    """The pass also keeps the steps of pieces of up to 27 bytes that are no token, by their
    slot in the token hash, and finds them again by their bytes: words of 10, 12, 20, 27 and 28
    bytes that are no token, alike in their first nine bytes, two hundred of each length in a
    text of 8 KiB (a memo of 1,024 slots, so that words of one length share slots), each
    equals its own pass."""
    import random

    rng = random.Random(11)
    enc = tiktoken_inc.get_encoding(name)
    for length in (10, 12, 20, 27, 28):
        words = [" qzxjvkwq" + "".join(rng.choice("qzxjvk") for _ in range(length - 9)) for _ in range(200)]
        assert sum(len(enc.encode_ordinary(word)) > 1 for word in words) >= 190, (name, length)
        text = "".join(rng.choice(words) for _ in range(8192 // length))
        assert 4096 < len(text.encode()) <= 8192
        assert_pass_is_each_piece_alone(enc, text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_pass_on_corpora_equals_each_piece_alone(name, corpora):
    """The same on the first 256 KiB of each corpus."""
    from support import CORPUS_FILES

    enc = tiktoken_inc.get_encoding(name)
    for file_name in CORPUS_FILES:
        text = (corpora / file_name).read_text(encoding="utf-8")[: 1 << 18]
        assert_pass_is_each_piece_alone(enc, text)


# ------------------------------------------------------------------ healing

continuations = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=texts, tails=st.lists(continuations, min_size=1, max_size=5), pretokenize=st.booleans())
def test_heal_is_sound(text, tails, pretokenize):
    for name in MAIN_ENCODINGS:
        enc = tiktoken_inc.get_encoding(name, pretokenize=pretokenize)
        tokens = enc.encode(text, allowed_special="all")
        kept, rest = enc.heal(tokens)
        assert tokens[: len(kept)] == kept
        assert enc.decode_bytes(kept) + rest.encode() == text.encode()
        for tail in tails:
            assert enc.encode(text + tail, allowed_special="all")[: len(kept)] == kept, (name, text, tail)


def test_heal_examples():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    assert enc.heal(enc.encode("The quick brown fo")) == ([791, 4062, 14198], " fo")
    assert enc.heal([]) == ([], "")
    eot = enc.encode("<|endoftext|>", allowed_special="all")
    assert enc.heal(enc.encode("hi") + eot) == ([enc.encode_single_token("hi")] + eot, "")
    kept, rest = enc.heal(enc.encode("你好世界"))  # kept tokens end on a character boundary
    assert enc.decode_bytes(kept).decode() + rest == "你好世界"
    with pytest.raises(ValueError, match="whole UTF-8 characters"):
        enc.heal(enc.encode("😀")[:1])  # half an emoji
    custom = tiktoken_inc.Encoding("custom", pat_str=r"\S+|\s+", mergeable_ranks=enc._mergeable_ranks,
                                   special_tokens={})
    kept, rest = custom.heal(custom.encode("hello wor"))
    assert custom.decode(kept) == "hello " and rest == "wor"
