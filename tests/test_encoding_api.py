"""tiktoken_inc.Encoding against tiktoken 0.14, method by method, for every registered encoding.

Every public (and the commonly used private) method of tiktoken's Encoding is called on
both with the same arguments; results must be identical, and so must exception types and
messages (disallowed special tokens, unknown encodings, invalid ids, unknown single
tokens, wrong argument types).  Inputs are hand-picked texts that hit the regex patterns'
corners (contractions, whitespace runs, \\r\\n, NBSP, CJK, emoji, digits, specials).
gpt2 is compared with tiktoken's r50k_base (same ranks, same specials, same pattern).
"""
from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import tiktoken

import tiktoken_inc
from support import ALL_ENCODINGS, decodable, reference_name

SAMPLE_TEXTS = [
    "",
    "hello world",
    "Hello, World! How are you today?",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\r\n\r\n",
    "  \n\n  ",
    "a\n\n\nb",
    "trailing   ",
    "   leading",
    "tab\tseparated\tvalues\t",
    "don't DON'T they're THEY'RE I'll've you'd we'm",
    " they'r",
    " they're",
    "don'",
    "x's 's ' '' ''' 'll 've",
    "O'Neil's HELLO'S A'B'C",
    "don\u2019t",
    "a\u00a0b \u00a0 \u00a0\u00a0c",
    "\u3000\u2003\u200b zero width",
    "中文字符测试，包括标点符号。",
    "日本語のテキストです。カタカナも。",
    "한국어 텍스트",
    "Привет, мир! Ёлка.",
    "مرحبا بالعالم",
    "שָׁלוֹם עוֹלָם",
    "ΑΒΓ αβγ ǅ ǈ ǋ",
    "e\u0301 a\u0300\u0301\u0302 n\u0303",
    "😀 👍🏽 🇫🇷 ❤️‍🔥 👨‍👩‍👧‍👦",
    "0 1 12 123 1234 12345 123456 3.14159 1,000,000 0x1F",
    "٣٤٥ ൧൨ ²³",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    "https://example.com/path?a=1&b=two#frag",
    "!!!???... --- *** /// \\\\ ::",
    " @param {string} name",
    "<|endoftext",
    "endoftext|>",
    "<|fim_prefix|",
    "x" * 1000,
    " " * 500 + "x",
    "\n" * 100,
    "word " * 200,
    "\t \t\n \r\n\t",
    "ab\r\ncd\re\nf",
    "a" + " " * 3 + "b" + " " * 7,
]

SPECIAL_TEXTS = [
    "<|endoftext|>",
    "hello<|endoftext|>world",
    "<|endoftext|><|endoftext|>",
    " <|endoftext|> \n",
    "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>c",
    "x<|endofprompt|>y",
    "<|endoftext|<|endoftext|>|>",
    "<|start|>user<|message|>hi<|end|><|reserved_200100|>",
]


@pytest.fixture(scope="module", params=ALL_ENCODINGS)
def pair(request, encoding, reference):
    """(ours, tiktoken's) for one encoding name."""
    return encoding(request.param), reference(request.param)


def outcome(call):
    """('ok', result) or ('raise', exception type, args) — to compare behaviour, errors included."""
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the exception is the result being compared
        return ("raise", type(exc), exc.args)


def assert_same(ours_call, theirs_call, what=""):
    a, b = outcome(ours_call), outcome(theirs_call)
    assert a == b, what


# --------------------------------------------------------------------------- attributes
def test_attributes(pair):
    """name, n_vocab, max_token_value, eot_token, special_tokens_set, repr, incremental."""
    ours, theirs = pair
    assert ours.name in ALL_ENCODINGS
    assert reference_name(ours.name) == theirs.name
    assert repr(ours) == f"<Encoding {ours.name!r}>"
    assert ours.n_vocab == theirs.n_vocab
    assert ours.max_token_value == theirs.max_token_value
    assert ours.eot_token == theirs.eot_token
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert isinstance(ours.special_tokens_set, set)
    assert ours.incremental is True  # every OpenAI rank file is canonical and proper


def test_incremental_is_read_only(encoding):
    """`incremental` is a read-only property."""
    enc = encoding("cl100k_base")
    with pytest.raises(AttributeError):
        enc.incremental = False
    assert enc.incremental is True


def test_token_byte_values(pair):
    """token_byte_values: the same list (tiktoken returns it sorted by bytes)."""
    ours, theirs = pair
    assert ours.token_byte_values() == theirs.token_byte_values()


def test_is_special_token(pair):
    """is_special_token for every special id and every other id up to max_token_value + 1."""
    ours, theirs = pair
    for token in range(ours.max_token_value + 2):
        assert ours.is_special_token(token) == theirs.is_special_token(token), token


# --------------------------------------------------------------------------- single tokens
def test_decode_single_token_bytes_every_id(pair):
    """decode_single_token_bytes for every id (holes raise KeyError with the same args)."""
    ours, theirs = pair
    for token in range(ours.max_token_value + 2):
        assert_same(lambda: ours.decode_single_token_bytes(token), lambda: theirs.decode_single_token_bytes(token), token)
    for token in (-1, 2**32, 2**64):
        a, b = outcome(lambda: ours.decode_single_token_bytes(token)), outcome(lambda: theirs.decode_single_token_bytes(token))
        assert a[:2] == b[:2] and a[0] == "raise", token


def test_encode_single_token(pair):
    """encode_single_token for every special, a sample of tokens (bytes and str), unknown bytes."""
    ours, theirs = pair
    for special in sorted(theirs.special_tokens_set)[:50]:
        assert ours.encode_single_token(special) == theirs.encode_single_token(special)
        assert ours.encode_single_token(special.encode()) == theirs.encode_single_token(special.encode())
    rng = random.Random(0)
    values = theirs.token_byte_values()
    for token in rng.sample(values, 2000):
        assert ours.encode_single_token(token) == theirs.encode_single_token(token)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert ours.encode_single_token(text) == theirs.encode_single_token(text)
    for unknown in (b"zzzzqqqq", b"\xff\xfe\xfd", "no such token at all", b"", ""):
        assert_same(lambda: ours.encode_single_token(unknown), lambda: theirs.encode_single_token(unknown), unknown)


# --------------------------------------------------------------------------- encode
def test_encode_ordinary_and_encode(pair):
    """encode_ordinary, encode (default), encode(disallowed_special=()) on every sample text."""
    ours, theirs = pair
    for text in SAMPLE_TEXTS + SPECIAL_TEXTS:
        want = theirs.encode_ordinary(text)
        assert ours.encode_ordinary(text) == want, text
        assert ours.encode(text, disallowed_special=()) == want, text
        assert_same(lambda: ours.encode(text), lambda: theirs.encode(text), text)


def test_encode_with_specials(pair):
    """allowed_special="all", a subset of the specials, and both parameters together."""
    ours, theirs = pair
    specials = sorted(theirs.special_tokens_set)
    subsets = [set(), {specials[0]}, set(specials[:3]), {"<|endoftext|>"} & set(specials)]
    for text in SAMPLE_TEXTS[:10] + SPECIAL_TEXTS:
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), text
        for allowed in subsets:
            assert_same(
                lambda: ours.encode(text, allowed_special=allowed),
                lambda: theirs.encode(text, allowed_special=allowed),
                (text, allowed),
            )
            assert ours.encode(text, allowed_special=allowed, disallowed_special=()) == theirs.encode(
                text, allowed_special=allowed, disallowed_special=()
            ), (text, allowed)


def test_special_argument_forms(pair):
    """allowed/disallowed specials given as list, tuple, frozenset, "all" or empty: as tiktoken."""
    ours, theirs = pair
    forms = [
        {"disallowed_special": ["<|endoftext|>"]},
        {"disallowed_special": ("<|endoftext|>",), "allowed_special": frozenset()},
        {"allowed_special": frozenset({"<|endoftext|>"})},
        {"allowed_special": "all", "disallowed_special": "all"},
        {"allowed_special": set(), "disallowed_special": set()},
        {"allowed_special": {"<|endoftext|>", "<|not a special|>"}},
    ]
    for text in SPECIAL_TEXTS[:6] + ["plain text"]:
        for kwargs in forms:
            for method in ("encode", "encode_to_numpy", "encode_with_unstable"):
                a = outcome(lambda: getattr(ours, method)(text, **kwargs))
                b = outcome(lambda: getattr(theirs, method)(text, **kwargs))
                if method == "encode_to_numpy":
                    a, b = [(r[0], r[1].tolist()) if r[0] == "ok" else r for r in (a, b)]
                if method == "encode_with_unstable":
                    a, b = [(r[0], r[1][0], {tuple(c) for c in r[1][1]}) if r[0] == "ok" else r for r in (a, b)]
                assert a == b, (method, text, kwargs)


def test_disallowed_special_message(pair):
    """The ValueError for a disallowed special token has tiktoken's exact message."""
    ours, theirs = pair
    for special in sorted(theirs.special_tokens_set)[:20]:
        for text in (special, f"some text {special} more", f"{special}{special}"):
            with pytest.raises(ValueError) as mine:
                ours.encode(text)
            with pytest.raises(ValueError) as ref:
                theirs.encode(text)
            assert str(mine.value) == str(ref.value)
            for method in ("encode_to_numpy", "encode_with_unstable"):
                assert_same(lambda: getattr(ours, method)(text), lambda: getattr(theirs, method)(text), (method, text))
            assert_same(
                lambda: ours.encode(text, disallowed_special={special}, allowed_special=set()),
                lambda: theirs.encode(text, disallowed_special={special}, allowed_special=set()),
            )


def test_lone_surrogates(pair):
    """Lone surrogates in str are replaced as tiktoken does (encode and encode_ordinary)."""
    ours, theirs = pair
    for text in ["\ud800", "a\udfffb", "\ud83d\ude00 ok", "x\ud800\ud800 \udc00y", "\ud800" * 10]:
        assert ours.encode(text) == theirs.encode(text), ascii(text)
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), ascii(text)


def test_encode_bytes(pair):
    """_encode_bytes on valid UTF-8, invalid UTF-8 and truncated multibyte characters."""
    ours, theirs = pair
    cases = [b"", b"hello", b"\xff", b"\x80\x80", b"ab\xffcd", b"\xe4\xb8", b"hello \xe4\xb8", b"\xf0\x9f\x98",
             b"\xf0\x9f\x98\x80\xf0", b"caf\xc3", b"\xc3\xa9\xc3", b"a\xed\xa0\x80b", b"don't \xe2\x80",
             b"  \xe4", b"\n\n\xff\n", bytes(range(256)), b"<|endoftext|>\xff"]
    for text in SAMPLE_TEXTS:
        data = text.encode("utf-8")
        cases += [data, data[:-1], data[1:]]
    for data in cases:
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), data


def test_encode_single_piece_and_native_bpe(pair):
    """_encode_single_piece (str and bytes) and _encode_only_native_bpe (tiktoken panics on an
    empty single piece, so the empty text is left out)."""
    ours, theirs = pair
    for text in filter(None, SAMPLE_TEXTS):
        assert ours._encode_single_piece(text) == theirs._encode_single_piece(text), text
        assert ours._encode_single_piece(text.encode()) == theirs._encode_single_piece(text.encode()), text
        assert ours._encode_only_native_bpe(text) == theirs._encode_only_native_bpe(text), text


def test_encode_with_unstable(pair):
    """encode_with_unstable: identical stable tokens; completions equal as sets of tuples."""
    ours, theirs = pair
    texts = ["hello fanta", "hello wor", "don'", " they'r", "a b  ", "中文", "123", "x\n", "😀", "   ",
             "def f(", "<|endoftext", "Hello, World", "a" * 50]
    # Text ending in whitespace has ~10^5 completions (slow on both sides): two such cases are enough.
    texts += [t[:k] for t in SAMPLE_TEXTS[:25] for k in (len(t) // 2, len(t)) if t[:k] and not t[:k][-1].isspace()]
    for text in dict.fromkeys(texts):
        stable, completions = ours.encode_with_unstable(text)
        want_stable, want_completions = theirs.encode_with_unstable(text)
        assert stable == want_stable, text
        assert {tuple(c) for c in completions} == {tuple(c) for c in want_completions}, text
    text = "x<|endoftext|>hello fan"
    stable, completions = ours.encode_with_unstable(text, allowed_special="all")
    want_stable, want_completions = theirs.encode_with_unstable(text, allowed_special="all")
    assert stable == want_stable
    assert {tuple(c) for c in completions} == {tuple(c) for c in want_completions}


def test_encode_to_numpy_and_batches(pair):
    """encode_to_numpy (uint32 array), encode_batch, encode_ordinary_batch."""
    ours, theirs = pair
    texts = SAMPLE_TEXTS[:20]
    for text in texts:
        array = ours.encode_to_numpy(text)
        assert array.dtype == np.uint32
        assert array.tolist() == theirs.encode(text)
    assert ours.encode_batch(texts, num_threads=2) == theirs.encode_batch(texts)
    assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)
    assert ours.encode_batch(SPECIAL_TEXTS, allowed_special="all") == theirs.encode_batch(SPECIAL_TEXTS, allowed_special="all")


# --------------------------------------------------------------------------- decode
def _token_lists(theirs, rng: random.Random) -> list[list[int]]:
    valid = [t for t in range(theirs.max_token_value + 1) if decodable(theirs, t)]
    lists = [[], [valid[0]], valid[:50], valid[-50:]]
    lists += [[rng.choice(valid) for _ in range(rng.randint(1, 40))] for _ in range(200)]
    lists += [theirs.encode(t, allowed_special="all") for t in SAMPLE_TEXTS + SPECIAL_TEXTS]
    return lists


def test_decode_family(pair):
    """decode (every errors= mode), decode_bytes, decode_tokens_bytes, decode_with_offsets,
    decode_batch, decode_bytes_batch on random id lists (specials included)."""
    ours, theirs = pair
    lists = _token_lists(theirs, random.Random(1))
    for tokens in lists:
        assert ours.decode_bytes(tokens) == theirs.decode_bytes(tokens), tokens
        assert ours.decode(tokens) == theirs.decode(tokens), tokens
        for errors in ("ignore", "backslashreplace", "surrogateescape"):
            assert ours.decode(tokens, errors=errors) == theirs.decode(tokens, errors=errors), (tokens, errors)
        assert_same(lambda: ours.decode(tokens, errors="strict"), lambda: theirs.decode(tokens, errors="strict"), tokens)
        assert ours.decode_tokens_bytes(tokens) == theirs.decode_tokens_bytes(tokens), tokens
        assert_same(lambda: ours.decode_with_offsets(tokens), lambda: theirs.decode_with_offsets(tokens), tokens)
    assert ours.decode_batch(lists[:50]) == theirs.decode_batch(lists[:50])
    assert ours.decode_bytes_batch(lists[:50]) == theirs.decode_bytes_batch(lists[:50])


def test_decode_invalid_ids(pair):
    """KeyError("Invalid token for decoding: N") for unknown ids; overflow for out-of-range ints."""
    ours, theirs = pair
    bad_ids = [theirs.max_token_value + 1, theirs.max_token_value + 1000, 2**32 - 1]
    bad_ids += [t for t in range(theirs.max_token_value) if not decodable(theirs, t)][:3]  # holes
    for bad in bad_ids:
        for tokens in ([bad], [0, 1, bad, 2], [bad, bad + 1 if bad + 1 < 2**32 else 0]):
            for method in ("decode_bytes", "decode", "decode_tokens_bytes", "decode_with_offsets"):
                assert_same(lambda: getattr(ours, method)(tokens), lambda: getattr(theirs, method)(tokens), (method, tokens))
    for tokens in ([-1], [0, 2**32], [2**70]):
        for method in ("decode_bytes", "decode"):
            a, b = outcome(lambda: getattr(ours, method)(tokens)), outcome(lambda: getattr(theirs, method)(tokens))
            assert a[0] == b[0] == "raise" and a[1] == b[1], (method, tokens, a, b)


def test_round_trip(pair):
    """decode(encode(text)) == text for every sample text."""
    ours, _ = pair
    for text in SAMPLE_TEXTS + SPECIAL_TEXTS:
        assert ours.decode(ours.encode(text, allowed_special="all")) == text


# --------------------------------------------------------------------------- argument errors
@pytest.mark.parametrize("name", ["cl100k_base"])
def test_wrong_argument_types(name, encoding, reference):
    """Wrong argument types raise the same exception types as tiktoken."""
    ours, theirs = encoding(name), reference(name)
    calls = [
        ("encode_ordinary", (b"bytes",), {}),
        ("encode_ordinary", (None,), {}),
        ("encode", (123,), {}),
        ("encode", ("x",), {"allowed_special": ["<|endoftext|>"]}),
        ("_encode_bytes", ("str",), {}),
        ("encode_single_token", (3,), {}),
        ("decode_single_token_bytes", ("a",), {}),
        ("decode_bytes", ("abc",), {}),
        ("decode_bytes", ([1.5],), {}),
        ("decode", ([None],), {}),
    ]
    for method, args, kwargs in calls:
        a = outcome(lambda: getattr(ours, method)(*args, **kwargs))
        b = outcome(lambda: getattr(theirs, method)(*args, **kwargs))
        assert a[0] == b[0], (method, args, a, b)
        if b[0] == "raise":
            assert a[1] is b[1], (method, args, a, b)
        else:
            assert a == b, (method, args)


# --------------------------------------------------------------------------- registry and pickling
def test_registry(encoding):
    """get_encoding caches, list_encoding_names, encoding_for_model; unknown names are ValueError."""
    for name in ALL_ENCODINGS:
        assert encoding(name) is encoding(name)
        assert encoding(name).name == name
    assert set(ALL_ENCODINGS) <= set(tiktoken_inc.list_encoding_names())
    for model in ("gpt-4", "gpt-4o", "gpt-3.5-turbo", "text-davinci-003", "gpt2", "davinci", "code-davinci-002"):
        assert tiktoken_inc.encoding_name_for_model(model) == tiktoken.encoding_name_for_model(model)
        assert tiktoken_inc.encoding_for_model(model).name == tiktoken.encoding_name_for_model(model)
    with pytest.raises(KeyError):
        tiktoken_inc.encoding_for_model("no-such-model")
    with pytest.raises(ValueError) as info:
        tiktoken_inc.get_encoding("no_such_encoding")
    assert str(info.value).startswith("Unknown encoding no_such_encoding")
    with pytest.raises(ValueError) as mine:
        tiktoken_inc.get_encoding(3)
    with pytest.raises(ValueError) as ref:
        tiktoken.get_encoding(3)
    assert str(mine.value) == str(ref.value)


@pytest.mark.parametrize("name", ALL_ENCODINGS)
def test_pickle_registered(name, encoding):
    """A registered encoding pickles and unpickles to an equivalent tiktoken_inc Encoding."""
    enc = encoding(name)
    clone = pickle.loads(pickle.dumps(enc))
    assert isinstance(clone, tiktoken_inc.Encoding)
    assert clone.name == name
    assert clone.incremental == enc.incremental
    for text in SAMPLE_TEXTS[:15] + SPECIAL_TEXTS[:3]:
        assert clone.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    assert clone.special_tokens_set == enc.special_tokens_set


def test_pickle_custom_encoding(reference):
    """A custom Encoding (not in the registry) pickles with its ranks, specials and pattern."""
    base = reference("r50k_base")
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257, b" a": 258}
    enc = tiktoken_inc.Encoding("custom", pat_str=base._pat_str, mergeable_ranks=ranks, special_tokens={"<|x|>": 300})
    clone = pickle.loads(pickle.dumps(enc))
    assert clone.name == "custom"
    assert clone.n_vocab == enc.n_vocab == 301
    text = "abc ab a<|x|> abcabc"
    assert clone.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    theirs = tiktoken.Encoding("custom", pat_str=base._pat_str, mergeable_ranks=ranks, special_tokens={"<|x|>": 300})
    assert enc.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")


def test_explicit_n_vocab(reference):
    """explicit_n_vocab is checked as tiktoken checks it."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    tiktoken_inc.Encoding("v", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|e|>": 257}, explicit_n_vocab=258)
    with pytest.raises((AssertionError, ValueError)):
        tiktoken_inc.Encoding("v", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={}, explicit_n_vocab=300)
