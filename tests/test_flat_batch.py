"""The flat batches: `encode_ordinary_batch_to_numpy` and `encode_batch_to_numpy`.

Each document's ids, `ids[offsets[i]:offsets[i + 1]]`, must equal tiktoken's for the same
text and arguments: random texts (every string width, lone surrogates, runs), the corpora's
documents, empty texts and empty lists, on one thread and several (the C batch's threaded
path starts at 64 KiB).  Special-token arguments behave as `encode_batch`'s, errors
included; encodings the C batch does not take (a custom pattern) give the same through
lists.  The private `_encode_flat` options of the corpus command (lines, end-of-text ids,
16-bit ids, UTF-8 bytes) are checked here against their definitions.
"""
from __future__ import annotations

import gc
import random
import signal
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tiktoken_inc
from support import CORPUS_FILES, corpus_documents
from tiktoken_inc import Encoding
from tiktoken_inc.core import NotUTF8Error

np = pytest.importorskip("numpy")


def documents_of(ids, offsets) -> list[list[int]]:
    """The flat result cut back into one list per document (and its shape checked)."""
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    assert offsets[0] == 0 and offsets[-1] == len(ids) and np.all(np.diff(offsets) >= 0)
    return [ids[start:end].tolist() for start, end in zip(offsets[:-1], offsets[1:])]


def random_texts(seed: int, count: int) -> list[str]:
    """Texts of many kinds: scripts, emoji, digits, whitespace runs, lone surrogates, empty."""
    rng = random.Random(seed)
    alphabet = "ab cd\n\t'0123中文😀퀠ա.,!?<|>é\u0416\U00010000\ud800\udfff"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400))) for _ in range(count)]
    texts[::17] = [""] * len(texts[::17])
    texts[5:5] = ["a" * 70_000, " " * 20_000, "中" * 9000, "x\ud83d\ude00y"]
    return texts


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
@pytest.mark.parametrize("num_threads", [1, 2, 8])
def test_random_texts_equal_tiktoken(name, num_threads, reference):
    """Many texts (more than the 64 KiB where threads start) and a few (the caller alone)."""
    enc = tiktoken_inc.get_encoding(name)
    texts = random_texts(num_threads, 1500)
    expected = [reference(name).encode_ordinary(text) for text in texts]
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts, num_threads=num_threads)) == expected
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts[:7], num_threads=num_threads)) == expected[:7]
    assert enc.encode_ordinary_batch(texts, num_threads=num_threads) == expected


@given(st.lists(st.text(max_size=60), max_size=30))
def test_generated_texts(texts):
    """Any list of any str (surrogates, control characters, empty) gives encode_ordinary's ids."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts, num_threads=2)) == [
        enc.encode_ordinary(text) for text in texts
    ]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_corpus_documents_equal_tiktoken(name, corpora, reference):
    enc = tiktoken_inc.get_encoding(name)
    for file_name in CORPUS_FILES:
        docs = corpus_documents((corpora / file_name).read_text(encoding="utf-8"))
        expected = reference(name).encode_ordinary_batch(docs)
        for num_threads in (1, 2):
            got = documents_of(*enc.encode_ordinary_batch_to_numpy(docs, num_threads=num_threads))
            assert got == expected, (name, file_name, num_threads)


def test_empty_list_and_empty_texts():
    enc = tiktoken_inc.get_encoding("o200k_base")
    ids, offsets = enc.encode_ordinary_batch_to_numpy([])
    assert ids.tolist() == [] and offsets.tolist() == [0]
    ids, offsets = enc.encode_ordinary_batch_to_numpy(["", "", ""])
    assert ids.tolist() == [] and offsets.tolist() == [0, 0, 0, 0]
    ids, offsets = enc.encode_batch_to_numpy([""] * 70_000 + ["hi"], num_threads=2)
    assert ids.tolist() == enc.encode("hi") and offsets[-2] == 0 and len(offsets) == 70_002


def test_arrays_are_writable_and_own_their_memory():
    """The arrays wrap the buffers C filled (no copy), and can be changed in place."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    ids, offsets = enc.encode_ordinary_batch_to_numpy(["hello world"] * 3)
    ids[0] = 7
    assert ids.tolist()[:3] == [7, 1917, 15339] and offsets.tolist() == [0, 2, 4, 6]


def test_any_sequence_or_iterable():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = ["hello", "world"]
    expected = [enc.encode_ordinary(text) for text in texts]
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(tuple(texts))) == expected
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(iter(texts))) == expected


SPECIAL_TEXTS = [
    "hello <|endoftext|> world",
    "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>",
    "plain text",
    "",
    "<|endoftext|>",
    "lone \ud800 and <|endofprompt|>",
]


@pytest.mark.parametrize(
    "allowed, disallowed",
    [
        ("all", "all"),
        ("all", ()),
        ({"<|endoftext|>"}, ()),
        (frozenset({"<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"}), ()),
        (set(), ()),
        ({"<|endoftext|>", "not a special token"}, ()),
    ],
)
def test_special_arguments_equal_encode_batch(allowed, disallowed, reference):
    """The ids of encode_batch (and tiktoken's) with the same special-token arguments."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = SPECIAL_TEXTS * 3000  # more than 64 KiB: the threaded path
    expected = reference("cl100k_base").encode_batch(
        texts, allowed_special=allowed, disallowed_special=disallowed
    )
    for num_threads in (1, 2):
        got = enc.encode_batch_to_numpy(
            texts, num_threads=num_threads, allowed_special=allowed, disallowed_special=disallowed
        )
        assert documents_of(*got) == expected
    assert enc.encode_batch(texts, allowed_special=allowed, disallowed_special=disallowed) == expected


@pytest.mark.parametrize("num_threads", [1, 2, 4])
def test_strs_whose_utf8_is_not_made_are_converted_by_the_threads(num_threads, reference):
    """A str that is not ASCII and whose UTF-8 CPython has not made is converted by the
    thread that encodes it, and its UTF-8 is not kept in the str (sys.getsizeof counts kept
    UTF-8).  A lone surrogate in one sends its item back to the calling thread, which
    replaces it as encode_ordinary does; a disallowed special token in such a str, or
    after it, raises encode's error for the first text holding one, in order."""
    enc, theirs = tiktoken_inc.get_encoding("cl100k_base"), reference("cl100k_base")
    line = "Il caffè è pronto — 中文 text, naïve 😀 words. "
    texts = [f"{index} {line * (index % 7 + 1)}" for index in range(1200)]
    texts[3] = "\ud800" + texts[3]
    texts[700] = texts[700] + "\udfff"
    texts[1199] = "lone 中文\ud83d after three-byte characters, at the end"
    sizes = [sys.getsizeof(text) for text in texts]
    expected = [theirs.encode_ordinary((text + " ")[:-1]) for text in texts]  # (a copy: tiktoken keeps UTF-8)
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts, num_threads=num_threads)) == expected
    assert documents_of(*enc.encode_batch_to_numpy(texts, num_threads=num_threads)) == expected
    assert enc.encode_ordinary_batch(texts, num_threads=num_threads) == expected
    assert [sys.getsizeof(text) for text in texts] == sizes
    without_surrogates = texts[4:700]
    assert enc.encode_batch(without_surrogates, num_threads=num_threads) == expected[4:700]
    assert [sys.getsizeof(text) for text in texts] == sizes
    # (encode_batch gives a text with lone surrogates to encode, which checks it for special
    # tokens first, as tiktoken's does)
    assert enc.encode_batch(texts, num_threads=num_threads) == expected
    for refused_at, surrogate_at in ((500, 300), (300, 500), (400, 400)):
        bad = list(texts)
        bad[refused_at] = bad[refused_at] + " <|endoftext|> 中"
        bad[surrogate_at] = "\udc00 " + bad[surrogate_at]
        bad[900] = "later <|fim_middle|> 中"
        with pytest.raises(ValueError) as ours:
            enc.encode_batch_to_numpy(bad, num_threads=num_threads)
        with pytest.raises(ValueError) as expected_error:
            theirs.encode((bad[refused_at] + " ")[:-1])
        assert str(ours.value) == str(expected_error.value)
        with pytest.raises(ValueError) as ours:
            enc.encode_batch(bad, num_threads=num_threads)
        assert str(ours.value) == str(expected_error.value)


@pytest.mark.parametrize("num_threads", [1, 2, 4])
def test_the_first_problem_in_order_though_larger_items_go_first(num_threads, reference):
    """The threads take the largest items first, and a problem stops only the items after it:
    a long text (an item of its own, taken first) that holds a disallowed special token, or
    bytes that are not UTF-8, after a short one that holds another, still leaves the short
    one's error, as encode_batch's first text in order."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = ["fine text " * 50] * 300
    texts[40] = "x <|fim_middle|> y"
    texts[250] = "long text " * 20_000 + "<|endoftext|>"
    with pytest.raises(ValueError) as ours:
        enc.encode_batch_to_numpy(texts, num_threads=num_threads)
    with pytest.raises(ValueError) as theirs:
        reference("cl100k_base").encode(texts[40])
    assert str(ours.value) == str(theirs.value)
    documents = [b"fine text " * 50] * 300
    documents[40] = b"bad \xff"
    documents[250] = b"long text " * 20_000 + b"\xfe"
    with pytest.raises(NotUTF8Error) as error:
        enc._encode_flat(documents, num_threads=num_threads, accept_bytes=True, disallowed_special=())
    assert (error.value.index, error.value.offset) == (40, 4)
    # Without the short one's problem, the long one's is said.
    texts[40] = "fine"
    documents[40] = b"fine"
    with pytest.raises(ValueError, match="endoftext"):
        enc.encode_batch_to_numpy(texts, num_threads=num_threads)
    with pytest.raises(NotUTF8Error) as error:
        enc._encode_flat(documents, num_threads=num_threads, accept_bytes=True, disallowed_special=())
    assert (error.value.index, error.value.offset) == (250, 200_000)


@pytest.mark.parametrize("num_threads", [1, 2])
def test_disallowed_special_raises_encodes_error(num_threads, reference):
    """A disallowed special token raises encode's ValueError (the first text holding one, in
    order, names it), whether the default ("all") or a given set disallows it."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = ["fine text " * 50] * 400
    texts[300] = "x <|fim_middle|> y"
    texts[350] = "x <|endoftext|> y"
    for allowed, disallowed in (((), "all"), ({"<|fim_middle|>"}, "all"), ((), {"<|endoftext|>"})):
        allowed = set(allowed)
        first = next(text for text in texts if any(token in text for token in
                     (enc.special_tokens_set - allowed if disallowed == "all" else disallowed)))
        with pytest.raises(ValueError) as ours:
            enc.encode_batch_to_numpy(texts, num_threads=num_threads, allowed_special=allowed,
                                      disallowed_special=disallowed)
        with pytest.raises(ValueError) as theirs:
            reference("cl100k_base").encode(first, allowed_special=allowed, disallowed_special=disallowed)
        assert str(ours.value) == str(theirs.value)


def test_argument_errors_as_encode_batch(reference):
    enc = tiktoken_inc.get_encoding("cl100k_base")
    with pytest.raises(TypeError) as ours:
        enc.encode_ordinary_batch_to_numpy(["ok", 3])
    with pytest.raises(TypeError) as theirs:
        reference("cl100k_base").encode_ordinary(3)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError):
        enc.encode_ordinary_batch_to_numpy(["ok", b"bytes"])
    with pytest.raises(TypeError):
        enc.encode_batch_to_numpy(["ok"], allowed_special=["<|endoftext|>"])  # not a set
    for num_threads in (0, -1):
        with pytest.raises(ValueError):
            enc.encode_ordinary_batch_to_numpy(["ok"], num_threads=num_threads)


def test_custom_pattern_and_no_pretokenize(reference):
    """Encodings the C flat batch splits without a pattern (pretokenize=False: one piece per
    stretch) or not at all (a custom pattern, through lists) give the same ids."""
    cl100k = tiktoken_inc.get_encoding("cl100k_base")
    custom = Encoding("custom_flat", pat_str=r"\S+|\s+", mergeable_ranks=cl100k._mergeable_ranks,
                      special_tokens={"<|endoftext|>": 100257})
    one_piece = tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)
    texts = random_texts(3, 300) + ["a<|endoftext|>b"]
    for enc in (custom, one_piece):
        expected = [enc.encode_ordinary(text) for text in texts]
        assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts, num_threads=2)) == expected
        expected = [enc.encode(text, allowed_special="all") for text in texts]
        assert documents_of(*enc.encode_batch_to_numpy(texts, allowed_special="all")) == expected
        with pytest.raises(ValueError, match="disallowed special token"):
            enc.encode_batch_to_numpy(texts)


def test_without_numpy(monkeypatch):
    """Without numpy: an ImportError that says what to install (nothing else needs numpy)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ImportError, match=r"pip install 'tiktoken_inc\[numpy\]'"):
        enc.encode_ordinary_batch_to_numpy(["hello"])
    with pytest.raises(ImportError, match="numpy is not installed"):
        enc.encode_batch_to_numpy(["hello"])
    ids, offsets = enc._encode_flat(["hello"])
    assert memoryview(ids).cast("I").tolist() == [15339]


def flat_lists(result, id_bytes: int = 4) -> tuple[list[int], list[int]]:
    ids, offsets = result
    return memoryview(ids).cast("I" if id_bytes == 4 else "H").tolist(), memoryview(offsets).cast("q").tolist()


@pytest.mark.parametrize("custom", [False, True])
def test_corpus_options(custom):
    """`_encode_flat`'s options, in C and (custom pattern) in Python: lines split at '\\n'
    (left out; a last line without it counts, a trailing newline adds no empty document),
    end-of-text ids, 16-bit ids, UTF-8 bytes, and bytes that are not UTF-8."""
    enc = tiktoken_inc.get_encoding("gpt2")
    if custom:
        enc = Encoding("custom_lines", pat_str=r"\S+|\s+", mergeable_ranks=enc._mergeable_ranks,
                       special_tokens={"<|endoftext|>": 50256})
    texts = [b"one\ntwo\n\nthree", "four\n", b"", "", "\n", "caf\u00e9 <|endoftext|>\n"]
    lines = ["one", "two", "", "three", "four", "", "caf\u00e9 <|endoftext|>"]
    expected = [enc.encode_ordinary(line) + [50256] for line in lines]
    for num_threads in (1, 2):
        for id_bytes in (2, 4):
            ids, offsets = flat_lists(enc._encode_flat(texts * 2000, num_threads=num_threads, lines=True, eot=50256,
                                                        id_bytes=id_bytes, accept_bytes=True,
                                                        disallowed_special=()), id_bytes)
            assert [ids[a:b] for a, b in zip(offsets, offsets[1:])] == expected * 2000
    ids, offsets = flat_lists(enc._encode_flat(["a\nb", b"c"], accept_bytes=True, disallowed_special=()))
    assert ids == enc.encode_ordinary("a\nb") + enc.encode_ordinary("c") and len(offsets) == 3
    with pytest.raises(NotUTF8Error) as error:
        enc._encode_flat([b"fine\n", b"ok\nbad \xe4\xbd here\n"] * 10, lines=True, accept_bytes=True)
    assert (error.value.index, error.value.offset) == (1, 7)
    # A surrogate, an overlong form, a code point above U+10FFFF, a byte that starts nothing, a cut character.
    for bad in (b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"\xff", b"ab\xe4"):
        with pytest.raises(NotUTF8Error):
            enc._encode_flat([b"x" * 100, bad], accept_bytes=True)
    with pytest.raises(TypeError):
        enc._encode_flat([b"bytes only with accept_bytes"])
    if not custom:
        with pytest.raises(ValueError, match="does not fit"):
            tiktoken_inc.get_encoding("cl100k_base")._encode_flat(["hello world"] * 9000, id_bytes=2, eot=100257)


def test_utf8_check_accepts_what_python_decodes():
    """The C UTF-8 check takes exactly what bytes.decode('utf-8') takes, at every boundary."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    rng = random.Random(5)
    edges = [0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]
    samples = [chr(c).encode() for c in edges] + [bytes([b]) for b in range(0x80, 0x100)]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6))) for _ in range(3000)]
    samples += [bytes([a, b, c]) for a in (0xE0, 0xED, 0xEF) for b in (0x80, 0x9F, 0xA0, 0xBF) for c in (0x80,)]
    samples += [bytes([a, b, 0x80, 0x80]) for a in (0xF0, 0xF4) for b in (0x80, 0x8F, 0x90, 0xBF)]
    samples += [bytes([a, b, c]) for a in (0xE1, 0xEC, 0xEE, 0xEF) for b in (0x7F, 0x80, 0xBF, 0xC0) for c in (0x80, 0xC0)]
    samples += [bytes([a, 0x80]) for a in (0xE1, 0xEE, 0xEF)]
    for data in samples:
        try:
            data.decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        padded = b"abcdefgh" + data + b"abcdefgh"
        if valid:
            enc._encode_flat([padded], accept_bytes=True)
        else:
            with pytest.raises(NotUTF8Error):
                enc._encode_flat([padded], accept_bytes=True)


def test_utf8_check_of_lines_says_the_first_bad_byte():
    """With `lines`, the lines of a text are checked together: the first bad byte of the first
    bad text is said, wherever it falls (a line's first or last byte, a cut character before
    the newline, a line of an item after a good one), as the text's decode says it."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    rng = random.Random(11)
    good = "".join(rng.choice(["ab", "\u00e9", "\u4e2d", "\U0001f600", " ", "\n", "\n\n"]) for _ in range(20_000))
    data = good.encode()
    for _ in range(300):
        bad_byte = rng.choice([b"\xff", b"\xc3", b"\xe4\xbd", b"\xed\xa0\x80", b"\x80"])
        at = rng.choice([rng.randrange(len(data)), data.find(b"\n", rng.randrange(len(data))), 0, len(data)])
        if at < 0:
            at = len(data)
        broken = data[:at] + bad_byte + data[at:]
        with pytest.raises(UnicodeDecodeError) as decoded:
            broken.decode("utf-8")
        for num_threads in (1, 2):
            with pytest.raises(NotUTF8Error) as error:
                enc._encode_flat([data, broken, b"\xff"], num_threads=num_threads, lines=True, accept_bytes=True,
                                 disallowed_special=())
            assert (error.value.index, error.value.offset) == (1, decoded.value.start), (at, bad_byte)


class _Stop(Exception):
    """What the test's signal handler raises."""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.parametrize("num_threads", [1, 2])
def test_flat_batch_stops_on_a_signal(num_threads):
    """A signal handler that raises during a long flat batch stops it (the calling thread
    waits without the GIL and runs the handlers every few milliseconds); the encoding works
    afterwards."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = [f"text {i} " + "word " * 4000 for i in range(2000)]  # 40 MB: far longer than 5 ms

    def stop(signum, frame):
        raise _Stop()

    collector_was_on = gc.isenabled()
    gc.disable()  # see test_threads.test_batch_stops_on_a_signal
    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.005)
        with pytest.raises(_Stop):
            enc.encode_ordinary_batch_to_numpy(texts, num_threads=num_threads)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if collector_was_on:
            gc.enable()
    assert documents_of(*enc.encode_ordinary_batch_to_numpy(texts[:3])) == [enc.encode_ordinary(t) for t in texts[:3]]


def test_other_threads_run_while_a_flat_batch_encodes():
    """The GIL is free while the flat batch encodes: a Python thread counting meanwhile
    makes progress (the list batch's calling thread holds it to build lists)."""
    import threading

    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = [f"text {i} " + "word " * 2000 for i in range(1000)]
    counted = 0
    running = threading.Event()
    finished = threading.Event()

    def count() -> None:
        nonlocal counted
        running.set()
        while not finished.is_set():
            counted += 1

    counter = threading.Thread(target=count)
    counter.start()
    running.wait()
    try:
        before = counted
        enc.encode_ordinary_batch_to_numpy(texts, num_threads=1)
        during = counted - before
    finally:
        finished.set()
        counter.join()
    assert during > 1000
