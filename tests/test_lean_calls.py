"""The one-call encoders (tiktoken_inc/_tki_python.c) give what the cffi paths and tiktoken give.

encode_ordinary and encode_ordinary_batch go through functions that read a str's UTF-8 in
place and fill lists from shared int objects.  Each is compared here with the cffi path it
replaces (`lean=False`) and with tiktoken, across the sizes where its behaviour changes (an
output on the stack or on the heap, with or without the GIL), and for ids beyond the shared
int table.  Wrong arguments must raise what encode_ordinary raises, and an encoder must keep
its vocabulary alive on its own.
"""
from __future__ import annotations

import gc
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc._native as native
from support import CORPORA_DIR, CORPUS_FILES, MAIN_ENCODINGS, decodable
from tiktoken_inc._native import NativeVocab, lib

#: Text lengths around the C thresholds: ids on the stack (<= 1024), the GIL kept (< 2048).
SIZES = [0, 1, 2, 7, 100, 1023, 1024, 1025, 2047, 2048, 2049, 5000, 70_000]
ALPHABET = "ab cd\n\t\r'0123中文😀퀠ա.,!?<|>\u00a0\u3000" + "".join(map(chr, range(0x400, 0x420)))


def random_texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(size)) for size in SIZES]
    texts += [" " * 3000, "a" * 5000, "中" * 2000, "hello world"]
    if CORPORA_DIR.is_dir():
        for name in CORPUS_FILES:
            text = (CORPORA_DIR / name).read_text(encoding="utf-8")
            start = rng.randrange(len(text) // 2)
            texts += [text[start:start + size] for size in (300, 3000, 30_000)]
    return texts


def test_lean_functions_are_installed():
    """On CPython the lean encoders are the ones in use (else this module tests nothing new)."""
    if sys.implementation.name != "cpython":
        pytest.skip("the lean encoders are CPython's")
    assert native._python_functions is not None
    assert type(native.NativeVocab.text_encoder(_vocab_of("cl100k_base"), lib.TKI_PATTERN_CL100K)).__name__ == (
        "builtin_function_or_method"
    )


def _vocab_of(name: str) -> NativeVocab:
    import tiktoken_inc

    return tiktoken_inc.get_encoding(name)._core_bpe._vocab


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_encode_equals_cffi_path_and_tiktoken(name, encoding, reference):
    enc, theirs = encoding(name), reference(name)
    core = enc._core_bpe
    lean = core._vocab.text_encoder(core._pattern)
    plain = core._vocab.text_encoder(core._pattern, lean=False)
    for text in random_texts(len(name)):
        want = theirs.encode_ordinary(text)
        assert lean(text) == want, (name, len(text))
        assert lean(text.encode("utf-8")) == want
        assert plain(text) == want
        assert enc.encode_ordinary(text) == want


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_encode_many_equals_cffi_path_and_tiktoken(name, encoding, reference):
    core, theirs = encoding(name)._core_bpe, reference(name)
    lean = core._vocab.batch_encoder(core._pattern)
    plain = core._vocab.batch_encoder(core._pattern, lean=False)
    texts = random_texts(7)
    want = [theirs.encode_ordinary(text) for text in texts]
    assert lean(texts) == want
    assert lean(tuple(texts)) == want
    assert plain(texts) == want
    assert lean(texts, 3) == plain(texts, 3) == want  # threads
    assert lean([]) == plain([]) == []
    assert lean(["", "", "x"]) == plain(["", "", "x"]) == [[], [], theirs.encode_ordinary("x")]


def test_ids_beyond_the_shared_int_table():
    """Ids >= 2**18 get ints of their own; lists still hold the right values."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 300_000, b"abab": 300_001}
    vocab = NativeVocab(ranks, {})
    lean = vocab.text_encoder(lib.TKI_PATTERN_CL100K)
    plain = vocab.text_encoder(lib.TKI_PATTERN_CL100K, lean=False)
    text = "abab ab aba" * 300
    assert lean(text) == plain(text)
    assert lean(text)[:4] == [300_001, 32, 300_000, 32]
    assert vocab.batch_encoder(lib.TKI_PATTERN_CL100K)([text, "ab"]) == [plain(text), [300_000]]


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="reference counts are CPython's")
def test_id_lists_count_their_references():
    """A list holds one reference to each of its ints, short lists (filled in one pass) and
    long ones (two passes) alike, ids in the shared table or beyond it: the counts of the
    table's ints go up by one per item and back down when the lists go."""
    ranks = {bytes([b]): b for b in range(256)} | {b"hello": 1000, b"ab": 300_000, b"abab": 300_001}
    vocab = NativeVocab(ranks, {})
    lean = vocab.text_encoder(lib.TKI_PATTERN_CL100K)
    plain = vocab.text_encoder(lib.TKI_PATTERN_CL100K, lean=False)
    table_int = lean("hello")[0]
    before = sys.getrefcount(table_int)
    short = [("hello\nabab", 1), ("hello\n" * 30 + "abab", 30)]  # up to 64 ids: one pass
    long = [("hello\nab\n" * 20, 20), ("hello\nab\n" * 40 + "abab", 40), ("hello\n" * 3000, 3000)]
    for text, hellos in short + long:
        lists = [lean(text) for _ in range(10)]
        assert all(ids == plain(text) and ids.count(1000) == hellos for ids in lists)
        assert sys.getrefcount(table_int) == before + 10 * hellos
        beyond = lists[0][-1] if text.endswith("abab") else None
        del lists
        assert sys.getrefcount(table_int) == before
        if beyond is not None:
            assert beyond == 300_001 and sys.getrefcount(beyond) == 2  # this name and the call's


@pytest.mark.parametrize("name", ["r50k_base", "o200k_base"])
def test_id_lists_are_not_tracked_by_the_cycle_collector(name, encoding, reference):
    """Lists of ids skip the cyclic GC (its collections would walk all their ids), and are
    still plain lists; `list(ids)` is a tracked copy."""
    enc, ref = encoding(name), reference(name)
    text = "hello world, 中文 " * 500
    lists = [
        enc.encode_ordinary(text),
        enc.encode(text),
        *enc.encode_ordinary_batch([text, "a b"]),
        *enc.encode_batch([text, "a b"]),
    ]
    expected = [ref.encode_ordinary(text)] * 2 + [ref.encode_ordinary(text), ref.encode_ordinary("a b")] * 2
    for ids, want in zip(lists, expected):
        assert type(ids) is list and not gc.is_tracked(ids)
        assert ids == want
    copy = list(lists[0])
    assert copy == lists[0] and gc.is_tracked(copy)


@pytest.mark.parametrize("lean", [True, False])
def test_wrong_arguments(lean, encoding):
    core = encoding("cl100k_base")._core_bpe
    encode = core._vocab.text_encoder(core._pattern, lean=lean)
    encode_many = core._vocab.batch_encoder(core._pattern, lean=lean)
    with pytest.raises(TypeError):
        encode(3)
    with pytest.raises(UnicodeEncodeError):
        encode("a lone \ud800")
    with pytest.raises(TypeError, match="expected str, got int"):
        encode_many(["ok", 3])
    with pytest.raises(TypeError, match="expected str, got bytes"):
        encode_many(["ok", b"bytes"])
    if lean:  # the C batch replaces lone surrogates, as encode_ordinary does
        replaced = encoding("cl100k_base").encode_ordinary("a lone \udfff")
        assert encode_many(["ok", "a lone \udfff"]) == [encode("ok"), replaced]
        assert encode_many(["ok", "a lone \udfff"], 2) == [encode("ok"), replaced]
    else:  # (the caller then goes text by text)
        with pytest.raises(UnicodeEncodeError):
            encode_many(["ok", "a lone \udfff"])
        with pytest.raises(UnicodeEncodeError):
            encode_many(["ok", "a lone \udfff"], 2)


def test_through_the_encoding_api(encoding, reference):
    """Surrogates and wrong types behave as tiktoken's, also in batches."""
    enc, theirs = encoding("cl100k_base"), reference("cl100k_base")
    texts = ["a lone \ud800 here", "fine", "\udfff"]
    assert enc.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)
    assert [enc.encode_ordinary(text) for text in texts] == [theirs.encode_ordinary(text) for text in texts]
    with pytest.raises(TypeError):
        enc.encode_ordinary(b"bytes")
    with pytest.raises(TypeError):
        enc.encode_ordinary_batch(["ok", b"bytes"])


def test_encode_ordinary_calls_the_c_function(encoding, reference):
    """`enc.encode_ordinary` is an ordinary method whose one call is the C function, held by
    the instance (on CPython, a builtin: no Python frame besides the method's).  It gives
    what tiktoken gives (str subclasses too), hands lone surrogates and non-str to the
    method's own path, leaves a subclass's override alone, and makes no reference cycle:
    an Encoding is freed as soon as it is dropped, with the collector off."""
    import weakref

    from tiktoken_inc import Encoding

    base, theirs = encoding("o200k_base"), reference("o200k_base")
    assert "encode_ordinary" not in vars(base)
    if sys.implementation.name == "cpython":
        assert type(base._ordinary_encoder).__name__ == "builtin_function_or_method"
    class Text(str):
        pass

    for text in ["hello world", Text("hello world"), "a lone \ud800 here", "\udfff", ""] + random_texts(11):
        assert base.encode_ordinary(text) == Encoding.encode_ordinary(base, text) == theirs.encode_ordinary(text)
    for wrong in (b"bytes", 3, None):
        with pytest.raises(TypeError):
            base.encode_ordinary(wrong)

    class Shouting(Encoding):
        def encode_ordinary(self, text):
            return super().encode_ordinary(text.upper())

    loud = Shouting("shouting", pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks, special_tokens={})
    assert loud.encode_ordinary("hi") == base.encode_ordinary("HI")
    gc.disable()
    try:
        enc = Encoding("dropped", pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks, special_tokens={})
        assert enc.encode_ordinary("hi there") == base.encode_ordinary("hi there")
        dropped = weakref.ref(enc)
        del enc
        assert dropped() is None
    finally:
        gc.enable()


def assert_same_encode(ours, theirs, text: str) -> None:
    """ours.encode(text) gives tiktoken's ids, or raises its ValueError with its message."""
    try:
        want = theirs.encode(text)
    except ValueError as error:
        with pytest.raises(ValueError) as got:
            ours.encode(text)
        assert str(got.value) == str(error), ascii(text)
    else:
        assert ours.encode(text) == want, ascii(text)


def python_frames_of(call):
    """(the names of the Python frames that call() runs, beyond its own, call()'s result)."""
    frames: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return [name for name in frames if name != "<lambda>"], result


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the C functions are CPython's")
def test_encode_ordinary_makes_no_python_frame(encoding, reference):
    """On CPython `enc.encode_ordinary(text)` runs no Python frame: the class's method calls
    the instance's C function from C (_native.held_method).  It is still the method for
    whoever looks (signature, docstring, __wrapped__, keywords, unbound calls, autospec), and
    a patched `_ordinary_encoder` on the instance is what it calls."""
    from unittest import mock

    import inspect

    from tiktoken_inc import Encoding

    enc, theirs = encoding("cl100k_base"), reference("cl100k_base")
    encode = enc.encode_ordinary
    frames, ids = python_frames_of(lambda: [enc.encode_ordinary("hello world"), encode("hello world")])
    assert frames == [] and ids == [theirs.encode_ordinary("hello world")] * 2
    assert enc.encode_ordinary(text="hi there") == Encoding.encode_ordinary(enc, "hi there") == theirs.encode("hi there")
    with pytest.raises(TypeError):
        enc.encode_ordinary()
    with pytest.raises(TypeError):
        enc.encode_ordinary("a", "b")
    method = Encoding.__dict__["encode_ordinary"]
    assert str(inspect.signature(Encoding.encode_ordinary)) == "(self, text: 'str') -> 'list[int]'"
    assert method.__doc__ == method.__wrapped__.__doc__ and "ignoring special tokens" in method.__doc__
    assert method.__name__ == "encode_ordinary" and method.__qualname__ == "Encoding.encode_ordinary"
    with mock.patch.object(enc, "_ordinary_encoder", return_value=[7]) as held:
        assert enc.encode_ordinary("x") == [7]
    held.assert_called_once_with("x")
    spec = mock.create_autospec(Encoding, instance=True)
    spec.encode_ordinary("x")
    spec.encode_ordinary.assert_called_once_with("x")
    assert enc.encode_ordinary("x") == theirs.encode_ordinary("x")



@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the C functions are CPython's")
def test_stream_feed_makes_no_python_frame(encoding):
    """On CPython `encoder.feed(chunk)` runs no Python frame while the chunk can go straight to
    the C feed; where that declines (a str with lone surrogates, half a pair held, a failed
    stream) or raises, the method's own code runs and says the same as before: any error but
    another thread's marks the encoder failed, and every later call raises."""
    import inspect
    from unittest import mock

    from tiktoken_inc.streaming import StreamEncoder

    enc = encoding("cl100k_base")
    encoder = enc.stream_encoder()
    feed = encoder.feed
    frames, ids = python_frames_of(
        lambda: [encoder.feed("hello wor"), feed(b"ld and more " * 300), feed(bytearray(b" x"))])
    assert frames == []
    assert [i for part in ids for i in part] + encoder.finish() == enc.encode("hello wor" + "ld and more " * 300 + " x")
    # Half a surrogate pair held between str chunks: the method pairs them up, then the C feed again.
    encoder = enc.stream_encoder()
    parts = [encoder.feed("a\ud83d"), encoder.feed("\ude00 b"), encoder.feed("\ud800"), encoder.feed(" c"),
             encoder.finish()]
    assert [i for part in parts for i in part] == enc.encode("a\ud83d\ude00 b\ud800 c")
    # Any error marks the encoder failed, whichever path raised it.
    for bad, error in ((12, TypeError), (b"\xff", ValueError), (None, TypeError)):
        encoder = enc.stream_encoder()
        with pytest.raises(error):
            encoder.feed(bad)
        for call in (lambda: encoder.feed("more"), lambda: encoder.feed(b"more"), encoder.finish):
            with pytest.raises(ValueError, match="failed earlier"):
                call()
    # It is still the method for whoever looks, and what the instance holds is what it calls.
    method = StreamEncoder.__dict__["feed"]
    assert str(inspect.signature(StreamEncoder.feed)) == "(self, chunk: 'Chunk') -> 'List[int]'"
    assert method.__doc__ == method.__wrapped__.__doc__ and "final" in method.__doc__
    encoder = enc.stream_encoder()
    assert StreamEncoder.feed(encoder, chunk="hi") == [] and encoder.finish() == enc.encode("hi")
    with mock.patch.object(encoder, "_fast_feed", return_value=[7]) as held:
        assert encoder.feed("x") == [7]
    held.assert_called_once_with("x")
    with mock.patch.object(StreamEncoder, "feed", return_value=[8]):
        assert enc.stream_encoder().feed("y") == [8]


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the C functions are CPython's")
def test_default_encode_makes_no_python_frame(encoding, reference):
    """On CPython `enc.encode(text)` with the default arguments runs no Python frame, before
    and after someone has taken special_tokens_set; where the C function declines
    (special-token text, lone surrogates, no str) or any argument is given, the method's own
    code runs and says what tiktoken says.  It is still the method for whoever looks."""
    import inspect
    from unittest import mock

    from tiktoken_inc import Encoding

    enc, theirs = encoding("cl100k_base"), reference("cl100k_base")
    encode = enc.encode
    encode("hi")  # the first call makes the held function (Python), once
    frames, ids = python_frames_of(lambda: [enc.encode("hello world"), encode("hello world")])
    assert frames == [] and ids == [theirs.encode("hello world")] * 2
    assert enc.special_tokens_set == theirs.special_tokens_set  # taken: still one C call,
    enc.encode("hi")  # once the held function, now watching the set, is made again
    frames, ids = python_frames_of(lambda: enc.encode("hello world"))
    assert frames == [] and ids == theirs.encode("hello world")
    frames, _ = python_frames_of(lambda: enc.encode("hello", allowed_special="all"))
    assert "encode" in frames
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode("x <|endoftext|>")
    assert enc.encode("a \ud800 b") == theirs.encode("a \ud800 b")
    with pytest.raises(TypeError):
        enc.encode(b"bytes")
    with pytest.raises(TypeError):
        enc.encode("a", "b")
    assert enc.encode(text="hi") == Encoding.encode(enc, "hi") == theirs.encode("hi")
    method = Encoding.__dict__["encode"]
    assert "allowed_special" in str(inspect.signature(Encoding.encode))
    assert method.__doc__ == method.__wrapped__.__doc__ and method.__qualname__ == "Encoding.encode"
    with mock.patch.object(enc, "_held_encode", return_value=[7]) as held:
        assert enc.encode("x") == [7]
    held.assert_called_once_with("x")
    with mock.patch.object(Encoding, "encode", return_value=[8]):
        assert enc.encode("y") == [8]


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the C functions are CPython's")
@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_harmony"])
def test_single_tokens_and_counts_make_no_python_frame(name, encoding, reference):
    """decode_single_token_bytes(id), encode_single_token(text_or_bytes), count_tokens(text),
    count_tokens(text, limit=n), decode(ids) and decode_bytes(ids) run no Python frame where
    the C call takes the argument, and give tiktoken's answer (the method's, for a limit) for
    every id of the vocabulary (and a few past it) and every token's bytes and text; where
    the C call declines (special tokens, no int or no str/bytes, unknown ids, lone
    surrogates, a limit) the method answers, as tiktoken does."""
    enc, theirs = encoding(name), reference(name)
    calls = lambda: [enc.decode_single_token_bytes(300), enc.encode_single_token(b"ab"),  # noqa: E731
                     enc.encode_single_token("ab"), enc.count_tokens("hello world"), enc.decode([300, 301]),
                     enc.decode_bytes((300,)), enc.count_tokens("hello world", limit=2),
                     enc.count_tokens("hello world", limit=1), enc.count_tokens("hello world", limit=None)]
    calls()  # the first calls make the held functions (Python), once
    frames, got = python_frames_of(calls)
    assert frames == [] and got == [theirs.decode_single_token_bytes(300), theirs.encode_single_token(b"ab"),
                                    theirs.encode_single_token("ab"), len(theirs.encode("hello world")),
                                    theirs.decode([300, 301]), theirs.decode_bytes((300,)), 2, None, 2]

    def outcome(call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the type is what is compared
            return type(error).__name__

    for token in list(range(theirs.n_vocab + 3)) + [-1, 2**32, 2**64, 1.0, True, None, "1"]:
        want = outcome(theirs.decode_single_token_bytes, token)
        assert outcome(enc.decode_single_token_bytes, token) == want, token
        if isinstance(want, bytes) and isinstance(token, int) and token % 7 == 0:
            assert outcome(enc.encode_single_token, want) == outcome(theirs.encode_single_token, want), want
            text = want.decode("utf-8", "replace")
            assert outcome(enc.encode_single_token, text) == outcome(theirs.encode_single_token, text), text
    class Piece(bytes):
        pass
    for piece in [Piece(b"ab"), bytearray(b"ab"), "x\ud800", None, 5, "not one token at all", b""]:
        assert outcome(enc.encode_single_token, piece) == outcome(theirs.encode_single_token, piece), piece
    for text in ["", "hello world", "x <|endoftext|> y", "a \ud800 b", b"bytes", None]:
        want = outcome(lambda t: len(theirs.encode(t)), text)
        got = outcome(enc.count_tokens, text)
        assert got == want or (want == "TypeError" and got == "TypeError"), text
    assert enc.count_tokens("hello world " * 10, limit=3) is None
    method = type(enc).count_tokens.__wrapped__
    for text in ["", "hello world", "x <|endoftext|> y", "a \ud800 b", b"bytes", None]:
        for limit in [None, 0, 1, 2, 3, 100, 2**64 - 1, 2**64, 2**70, -1, True, False, 1.5, "2"]:
            want = outcome(method, enc, text, limit=limit)
            assert outcome(enc.count_tokens, text, limit=limit) == want, (text, limit)


def test_default_encode_follows_every_change_of_special_tokens_set(encoding):
    """The set taken out, changed in place (a token removed, added back), replaced, deleted
    (made afresh): encode(text) refuses exactly what tiktoken's refuses after the same
    changes, through the C call and through the method alike."""
    import tiktoken

    from tiktoken_inc import Encoding

    base = encoding("cl100k_base")
    args = dict(pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks, special_tokens=base._special_tokens)
    ours, theirs = Encoding("changes", **args), tiktoken.Encoding("changes", **args)
    texts = ["plain text", "x <|endoftext|> y", "<|fim_prefix|>", "a \ud800 <|endoftext|>"]

    def same() -> None:
        for text in texts:
            assert_same_encode(ours, theirs, text)

    same()
    for encoder in (ours, theirs):
        encoder.special_tokens_set.discard("<|endoftext|>")
    same()
    for encoder in (ours, theirs):
        encoder.special_tokens_set.add("<|endoftext|>")
    same()
    for encoder in (ours, theirs):
        encoder.special_tokens_set = {"<|fim_prefix|>"}
    same()
    for encoder in (ours, theirs):
        del encoder.special_tokens_set
    same()
    assert ours.special_tokens_set == theirs.special_tokens_set == set(base._special_tokens)


def test_encoder_keeps_its_vocabulary_alive():
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    vocab = NativeVocab(ranks, {})
    encode = vocab.text_encoder(lib.TKI_PATTERN_CL100K)
    encode_many = vocab.batch_encoder(lib.TKI_PATTERN_CL100K)
    del vocab
    gc.collect()
    assert encode("abab ab") == [256, 256, 32, 256]
    assert encode_many(["ab", "a"]) == [[256], [97]]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony", "r50k_base"])
def test_default_encode_in_one_call(name, encoding, reference):
    """encode(text) with the default arguments: one C call that refuses special-token text.
    Same ids and same errors as tiktoken, for texts with and without special-token text."""
    enc, theirs = encoding(name), reference(name)
    if sys.implementation.name == "cpython":
        assert enc._encode_default is not None
    specials = sorted(theirs.special_tokens_set)[:3]
    texts = random_texts(3) + [f"hi {token} there" for token in specials] + ["<|endoftext", "|>"]
    for text in texts:
        assert_same_encode(enc, theirs, text)
    assert enc.encode("a lone \ud800 and <|x") == theirs.encode("a lone \ud800 and <|x")
    with pytest.raises(TypeError):
        enc.encode(b"bytes")


def test_default_encode_follows_a_changed_special_tokens_set(encoding):
    """A token removed from special_tokens_set is no longer refused (as in tiktoken)."""
    from tiktoken_inc import Encoding

    base = encoding("cl100k_base")
    enc = Encoding("changed_set", pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks,
                   special_tokens=base._special_tokens)
    with pytest.raises(ValueError):
        enc.encode("<|endoftext|>")
    enc.special_tokens_set.discard("<|endoftext|>")
    assert enc.encode("<|endoftext|>") == enc.encode_ordinary("<|endoftext|>")


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony"])
def test_lean_decoders(name, encoding, reference):
    """decode_bytes and decode in one C call: the general path's bytes for ids it takes
    (mergeable and special, on the stack and on the heap), None for anything else."""
    enc, theirs = encoding(name), reference(name)
    core = enc._core_bpe
    if sys.implementation.name == "cpython":
        assert core._lean_decode is not None
    else:
        pytest.skip("the lean decoders are CPython's")
    rng = random.Random(5)
    valid = [t for t in (rng.randrange(theirs.max_token_value + 1) for _ in range(6000)) if decodable(theirs, t)]
    lists = [[], valid[:1], valid[:700], valid, sorted(theirs._special_tokens.values())[:4] + valid[:50]]
    for tokens in lists:
        want = theirs.decode_bytes(tokens)
        assert core._lean_decode_bytes(tokens) == want
        assert core._lean_decode_bytes(tuple(tokens)) == want
        assert core._lean_decode(tokens) == want.decode("utf-8", errors="replace")
        assert enc.decode(tokens) == theirs.decode(tokens)
        assert enc.decode(tokens, errors="ignore") == theirs.decode(tokens, errors="ignore")
    for bad in ([-1], [2**32], [2**40], [theirs.max_token_value + 1], [1, "2"], [1.0], [True], iter([1])):
        assert core._lean_decode_bytes(bad) is None
        assert core._lean_decode(bad) is None



@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony"])
def test_default_encode_batch(name, encoding, reference):
    """encode_batch with the default arguments: chunks in one C call each; texts with
    special-token text raise as in tiktoken, surrogates are replaced, a non-str raises."""
    enc, theirs = encoding(name), reference(name)
    texts = random_texts(11) + ["a lone \ud800 surrogate", "fine", ""] * 3
    for threads in (1, 2):
        assert enc.encode_batch(texts, num_threads=threads) == theirs.encode_batch(texts, num_threads=threads)
    token = sorted(theirs.special_tokens_set)[0]
    with pytest.raises(ValueError) as ours:
        enc.encode_batch(["ok", f"x {token} y", "ok"], num_threads=2)
    with pytest.raises(ValueError) as want:
        theirs.encode_batch(["ok", f"x {token} y", "ok"], num_threads=2)
    assert str(ours.value) == str(want.value)
    with pytest.raises(TypeError):
        enc.encode_batch(["ok", 3])
    encode_many = enc._special_batch_encoder(frozenset(), enc._all_special)  # what encode_batch calls
    assert encode_many(["hi", f"hi {token}", 3, "\udfff", "ok"]) == [
        theirs.encode("hi"), None, None, None, theirs.encode("ok")]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony"])
def test_encode_batch_with_specials(name, encoding, reference):
    """encode_batch with special tokens allowed or disallowed (one C call that runs the
    threads): the ids equal tiktoken's for every combination; text of a disallowed token
    raises tiktoken's ValueError; an allowed set that is not a set raises as tiktoken does."""
    enc, theirs = encoding(name), reference(name)
    specials = sorted(theirs.special_tokens_set)
    first, last = specials[0], specials[-1]
    texts = random_texts(13)[:40] + [
        f"x {first} y", f"{last}{first}", f"{first}", "a lone \ud800 surrogate", "", "plain",
        f"<|{first}", f"{first[:-1]} {last}",
    ]
    cases = [
        ("all", "all"), ({first}, "all"), (set(), ()), ({first}, ()), ("all", ()),
        (frozenset({first, "not special"}), {last}), (set(), {"plain"}), ({first}, {first}),
    ]
    for allowed, disallowed in cases:
        for threads in (1, 2):
            try:
                want = theirs.encode_batch(texts, allowed_special=allowed, disallowed_special=disallowed)
            except ValueError as error:
                with pytest.raises(ValueError) as ours:
                    enc.encode_batch(texts, num_threads=threads, allowed_special=allowed,
                                     disallowed_special=disallowed)
                assert str(ours.value) == str(error), (allowed, disallowed)
                continue
            got = enc.encode_batch(texts, num_threads=threads, allowed_special=allowed, disallowed_special=disallowed)
            assert got == want, (allowed, disallowed)
    with pytest.raises(TypeError):
        theirs.encode_batch(["ok"], allowed_special=[first])
    with pytest.raises(TypeError):
        enc.encode_batch(["ok"], allowed_special=[first])
    encode_many = enc._core_bpe.special_batch_encoder(frozenset({last}), frozenset({first}))
    assert encode_many([f"a{first}b", f"a{last}", 3, "\udfff"], 2) == [
        theirs.encode(f"a{first}b", allowed_special={first}), None, None, None]


def _through_utf16(text: str) -> bytes:
    """tiktoken's own replacement of surrogates, then UTF-8: the reference."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


@settings(max_examples=2000, deadline=None)
@given(text=st.lists(st.one_of(
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "a", "\x00", "é", "中", "😀",
                     "\ufffd", "\uffff"]),
    st.characters(categories=("Cs",)),
    st.characters(),
), max_size=30).map("".join))
def test_utf8_replacing_surrogates_is_tiktokens_replacement(text):
    """The one-pass C replacement equals the UTF-16 round trip tiktoken uses, on text made of
    lone and paired surrogates (high before low, low before high, at either end) among other
    characters; the pure-Python path (no C layer) gives the same."""
    want = _through_utf16(text)
    assert native.utf8_replacing_surrogates(text) == want, ascii(text)
    if native._python_functions is not None:
        assert native._python_functions.utf8_replacing_surrogates(text) == want


def test_utf8_replacing_surrogates_edges(monkeypatch):
    """Edge cases by hand, a str of each storage width, non-str refused, and the fallback."""
    cases = ["", "plain", "\ud800", "\udc00", "\ud800\udc00", "\udc00\ud800", "\ud800\ud800\udc00",
             "x" * 1000 + "\ud83d", "\ud83d\ude00" * 3, "é\udfff", "中\ud800", "😀\udc00😀", "\U0010ffff\ud800"]
    for text in cases:
        assert native.utf8_replacing_surrogates(text) == _through_utf16(text), ascii(text)
    if native._python_functions is not None:
        with pytest.raises(TypeError):
            native._python_functions.utf8_replacing_surrogates(b"bytes")
    monkeypatch.setattr(native, "_python_functions", None)
    for text in cases:
        assert native.utf8_replacing_surrogates(text) == _through_utf16(text), ascii(text)


def test_str_utf8_reuses_the_utf8_a_str_keeps(monkeypatch):
    """str_utf8 (what prefix_index reads a str through) gives the str's UTF-8, surrogates
    replaced as tiktoken does, for a str of each storage width, before and after an encode
    call has made CPython keep the UTF-8 with the str; the result is bytes of its own, and
    the pure-Python path gives the same."""
    import tiktoken_inc

    enc = tiktoken_inc.get_encoding("cl100k_base")
    cases = ["", "plain ascii", "héllo wörld", "中文 text", "emoji 😀 x", "\ud800 lone", "a\ud83d\ude00b",
             "x" * 5000 + "é"]
    for text in cases:
        want = _through_utf16(text)
        assert native.str_utf8(text) == want, ascii(text)
        enc.encode_ordinary(text)  # the str now keeps its UTF-8 (when it has no lone surrogate)
        got = native.str_utf8(text)
        assert type(got) is bytes and got == want, ascii(text)
        index = enc.prefix_index(text)
        assert index.data == want and index.encode(len(want)) == enc.encode_ordinary(text)
    if native._python_functions is not None:
        with pytest.raises(TypeError):
            native._python_functions.utf8_bytes(b"bytes")
    monkeypatch.setattr(native, "_python_functions", None)
    for text in cases:
        assert native.str_utf8(text) == _through_utf16(text), ascii(text)


def test_compiled_patterns_take_the_one_call_encoders(reference):
    """An Encoding whose pattern is compiled to C (here Llama 3's, over cl100k_base's ranks)
    encodes through the same one-call functions as the built-in patterns -- encode_ordinary,
    the default encode, the list and flat batches -- and each gives tiktoken's ids built from
    the same ranks, pattern and special tokens, across the sizes where the C functions
    change behaviour; special-token text, lone surrogates and non-str arguments behave as
    tiktoken's do."""
    import tiktoken
    import tiktoken_inc
    from tiktoken_inc.open_models import LLAMA3_PAT_STR

    ranks = reference("cl100k_base")._mergeable_ranks
    specials = {"<|endoftext|>": 100257, "<|x|>": 100300}
    ours = tiktoken_inc.Encoding("llama3-like", pat_str=LLAMA3_PAT_STR, mergeable_ranks=ranks, special_tokens=specials)
    theirs = tiktoken.Encoding("llama3-like", pat_str=LLAMA3_PAT_STR, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.pretokenizer == "compiled"
    if native._python_functions is not None:
        core = ours._core_bpe
        for function in (core._encode_str, core._encode_many, ours._ordinary_encoder, ours._encode_default):
            assert type(function).__name__ == "builtin_function_or_method"
    texts = random_texts(7) + ["\ud800 lone", "x<|endoftext|>y", "<|x|>" * 3, ""]
    for text in texts:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), ascii(text[:60])
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
        try:
            want = theirs.encode(text)
        except ValueError:
            with pytest.raises(ValueError, match="disallowed special token"):
                ours.encode(text)
        else:
            assert ours.encode(text) == want
    plain = [text for text in texts if "<|" not in text]
    assert ours.encode_ordinary_batch(texts, num_threads=2) == theirs.encode_ordinary_batch(texts, num_threads=2)
    assert ours.encode_batch(plain, num_threads=2) == theirs.encode_batch(plain, num_threads=2)
    assert ours.encode_batch(texts, allowed_special="all") == theirs.encode_batch(texts, allowed_special="all")
    try:
        import numpy  # noqa: F401
    except ImportError:
        return
    ids, offsets = ours.encode_ordinary_batch_to_numpy(texts, num_threads=2)
    for i, text in enumerate(texts):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == theirs.encode_ordinary(text)
    with pytest.raises(TypeError):
        ours.encode_ordinary(b"bytes")  # type: ignore[arg-type]
