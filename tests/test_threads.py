"""One Encoding shared by many threads gives exactly the serial results.

Sixteen threads start together (a barrier) and each runs, over the same varied inputs in
its own order: encode (all specials allowed), encode_ordinary, count_tokens with and without
a limit, decode, decode_tokens_bytes, truncate, and the C streaming encoder
(`_native.NativeStream`, one stream per thread over the shared vocabulary, fed in uneven
pieces).  Every thread's results must equal the serial ones.  The custom-pattern encoding is
built fresh for this module, so its lazily built tables are first used concurrently too.
The batch methods with num_threads=2 must equal their serial counterparts.
"""
from __future__ import annotations

import collections
import gc
import random
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import tiktoken_inc
from support import CORPORA_DIR, CORPUS_FILES, chunks_of
from tiktoken_inc import Encoding
from tiktoken_inc._native import NativeStream

N_THREADS = 16
LIMIT = 500
TRUNCATE_TO = 100
PIECE_SIZES = [1, 2, 3, 5, 64, 1000, 4096]


def varied_inputs() -> list[str]:
    """Deterministic inputs of many kinds: runs, mixed scripts, specials, lone surrogates,
    and corpus chunks when the corpora are present."""
    rng = random.Random(1234)
    alphabet = "ab cd\n\t'0123中文😀퀠ա.,!?<|>" + "".join(map(chr, range(0x400, 0x420)))
    texts = [
        "",
        "hello world",
        " " * 5000,
        "a" * 7000,
        "中" * 3000,
        "\n" * 2000 + "x",
        "퀠" * 1500,
        "<|endoftext|>hello<|fim_prefix|> world<|endofprompt|>",
        "text with a lone \ud800 surrogate and a pair \ud83d\ude00",
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 3000))) for _ in range(24)]
    if CORPORA_DIR.is_dir():
        for name in CORPUS_FILES:
            text = (CORPORA_DIR / name).read_text(encoding="utf-8")
            texts += chunks_of(text[rng.randrange(len(text) // 2):][:20_000], 5000)
    return texts


def stream_ids(enc: Encoding, text: str) -> list[int] | None:
    """encode_ordinary through a fresh C stream fed in uneven pieces (None: the encoding's
    pattern is split in Python, there is no C stream for it)."""
    pattern = enc._core_bpe._pattern
    if pattern is None:
        return None
    # Lone surrogates are replaced with U+FFFD (pairs joined) as encode_ordinary does.
    data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    stream = NativeStream(enc._core_bpe._vocab, pattern)
    ids, start, turn = [], 0, len(data)
    while start < len(data):
        size = PIECE_SIZES[turn % len(PIECE_SIZES)]
        ids += stream.feed(data[start:start + size])
        start, turn = start + size, turn + 1
    return ids + stream.finish()


def results(enc: Encoding, text: str) -> tuple:
    """Everything the threads compute for one input."""
    ids = enc.encode(text, allowed_special="all")
    return (
        ids,
        enc.encode_ordinary(text),
        enc.count_tokens(text, allowed_special="all"),
        enc.count_tokens(text, limit=LIMIT, disallowed_special=()),
        enc.decode(ids),
        enc.decode_tokens_bytes(ids[:50]),
        enc.truncate(text, TRUNCATE_TO, allowed_special="all"),
        stream_ids(enc, text),
    )


@pytest.fixture(scope="module")
def inputs() -> list[str]:
    return varied_inputs()


@pytest.fixture(scope="module")
def encodings():
    """cl100k_base, o200k_base, and a fresh custom-pattern encoding over cl100k's ranks."""
    cl100k = tiktoken_inc.get_encoding("cl100k_base")
    custom = Encoding(
        "custom_threads", pat_str=r"\S+|\s+", mergeable_ranks=cl100k._mergeable_ranks,
        special_tokens={"<|endoftext|>": 100257},
    )
    return {"cl100k_base": cl100k, "o200k_base": tiktoken_inc.get_encoding("o200k_base"), "custom": custom}


@pytest.mark.parametrize("name", ["custom", "cl100k_base", "o200k_base"])
def test_shared_encoding_16_threads(name, encodings, inputs):
    """16 threads at once, each over all inputs in its own order: the serial results."""
    enc = encodings[name]
    barrier = threading.Barrier(N_THREADS)

    def worker(seed: int) -> dict[int, tuple]:
        order = list(range(len(inputs)))
        random.Random(seed).shuffle(order)
        barrier.wait()
        return {index: results(enc, inputs[index]) for index in order}

    with ThreadPoolExecutor(N_THREADS) as executor:
        parallel = list(executor.map(worker, range(N_THREADS)))
    serial = {index: results(enc, text) for index, text in enumerate(inputs)}
    for seed, got in enumerate(parallel):
        for index in serial:
            assert got[index] == serial[index], (name, seed, index, inputs[index][:40])


def test_stream_matches_encode_ordinary(encodings, inputs):
    """The uneven-piece C stream gives encode_ordinary's ids (the serial baseline is right)."""
    for name in ("cl100k_base", "o200k_base"):
        enc = encodings[name]
        for text in inputs:
            ids = stream_ids(enc, text)
            if ids is not None:
                assert ids == enc.encode_ordinary(text), (name, text[:40])


@pytest.mark.parametrize("name", ["custom", "cl100k_base", "o200k_base"])
def test_batches_with_two_threads(name, encodings, inputs):
    """encode_ordinary_batch, encode_batch and decode_batch with num_threads=2 equal serial."""
    enc = encodings[name]
    ordinary = [enc.encode_ordinary(text) for text in inputs]
    assert enc.encode_ordinary_batch(inputs, num_threads=2) == ordinary
    assert enc.encode_batch(inputs, num_threads=2, allowed_special="all") == [
        enc.encode(text, allowed_special="all") for text in inputs
    ]
    assert enc.decode_batch(ordinary, num_threads=2) == [enc.decode(ids) for ids in ordinary]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
@pytest.mark.parametrize("num_threads", [1, 2, 8])
def test_ordinary_batch_in_chunks(name, num_threads, reference):
    """encode_ordinary_batch cuts the list into chunks, each one C call: the ids equal
    tiktoken's for every text, in order, whatever the chunking (many small texts, empty
    ones, one large text, lone surrogates, which the C batch replaces as encode_ordinary does)."""
    rng = random.Random(num_threads)
    texts = varied_inputs()
    small = [" ".join(rng.choice(["hello", "wörld", "中文", "", "\n", "  ", "'s", "123456"])
                      for _ in range(rng.randrange(0, 12))) for _ in range(3000)]
    batch = small[:1000] + texts + small[1000:] + ["x" * 300_000, "", "a\ud800b"] + small[:50]
    ours = tiktoken_inc.get_encoding(name).encode_ordinary_batch(batch, num_threads=num_threads)
    assert ours == reference(name).encode_ordinary_batch(batch)
    with pytest.raises(TypeError):
        tiktoken_inc.get_encoding(name).encode_ordinary_batch(["ok", 3], num_threads=num_threads)


def _width(text: str) -> int:
    """Bytes per character of CPython's storage of `text`: 1, 2 or 4."""
    widest = max(map(ord, text), default=0)
    return 1 if widest < 0x100 else 2 if widest < 0x10000 else 4


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_batch_of_every_string_width(name, reference):
    """The batch writes each str's UTF-8 from CPython's storage of it (1, 2 or 4 bytes per
    character) without the GIL: texts of every width, and each width's edges (U+007F/U+0080,
    U+07FF/U+0800, U+FFFF/U+10000), give tiktoken's ids; a lone surrogate in a text of
    2 or 4 bytes per character sends the batch item by item, as encode_ordinary does."""
    enc = tiktoken_inc.get_encoding(name)
    texts = ["plain ascii", "caf\u00e9 \u00ff\u0080\u007f", "\u0416\u07ff\u0800 \u4e2d\u6587 \uffff",
             "emoji \U0001f600 \U00010000 \U0010ffff \u00e9", "", "\u00e9" * 3000, "\u4e2d" * 3000,
             "\U0001f600" * 3000]
    assert enc.encode_ordinary_batch(texts, num_threads=2) == reference(name).encode_ordinary_batch(texts)
    for lone in ("\u4e2d\ud800", "\U0001f600\udfff x"):
        batch = texts + [lone]
        assert enc.encode_ordinary_batch(batch, num_threads=2) == [enc.encode_ordinary(t) for t in batch]


def _mixed_batch(seed: int) -> list[str]:
    """Many short texts of several scripts, empty ones and a few long ones: many of the C
    batch's runs of texts (about 16 KiB each)."""
    rng = random.Random(seed)
    words = ["hello", "wörld", "中文", "", "\n", "  ", "'s", "123456", "😀", "Привет", "  x"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(4000)]
    texts[100:100] = ["a" * 70_000, "", " " * 20_000, "中" * 9000]
    return texts


def test_batch_with_any_thread_count(reference):
    """Any thread count of 1 or more gives the same ids and texts (no more threads start
    than there are CPUs; decoding runs on the calling thread); below 1 raises ValueError,
    as tiktoken's thread pool does."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = _mixed_batch(7)[:1500]
    expected = reference("cl100k_base").encode_ordinary_batch(texts)
    for num_threads in (1, 3, 2**20, 2**62, 2**63 - 1, 2**70):
        assert enc.encode_ordinary_batch(texts, num_threads=num_threads) == expected
        assert enc.encode_batch(texts, num_threads=num_threads) == expected
        assert enc.decode_batch(expected, num_threads=num_threads) == reference("cl100k_base").decode_batch(expected)
        assert enc.decode_bytes_batch(expected[:50], num_threads=num_threads) == [enc.decode_bytes(ids) for ids in expected[:50]]
    for num_threads in (0, -5):
        with pytest.raises(ValueError):
            reference("cl100k_base").encode_ordinary_batch(texts, num_threads=num_threads)
        with pytest.raises(ValueError):
            reference("cl100k_base").decode_batch(expected, num_threads=num_threads)
        for method, argument in ((enc.encode_ordinary_batch, texts), (enc.encode_batch, texts),
                                 (enc.decode_batch, expected), (enc.decode_bytes_batch, expected)):
            with pytest.raises(ValueError):
                method(argument, num_threads=num_threads)


@pytest.mark.parametrize("threads", [2, 3, 8, 64, 1000])
def test_batch_threads_in_c(threads):
    """The C batch starts its own threads, as many as asked (up to 64, and one fewer than
    its runs of texts), whatever the CPUs: the lists come back in order and equal
    encode_ordinary's, for a list, a tuple and another sequence; a text that is not a str
    raises TypeError before any thread starts; specials refused in the default encode_batch
    give None."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    encode_many = enc._core_bpe._encode_many
    texts = _mixed_batch(threads)
    expected = [enc.encode_ordinary(text) for text in texts]
    assert encode_many(texts, threads) == expected
    assert encode_many(tuple(texts), threads) == expected
    assert encode_many(collections.UserList(texts), threads) == expected
    assert encode_many(texts[:3], threads) == expected[:3]
    assert encode_many([], threads) == []
    with pytest.raises(TypeError):
        encode_many(texts + [3], threads)
    refusing = enc._special_batch_encoder(frozenset(), enc._all_special)  # what encode_batch calls
    marked = [text + "<|endoftext|>" if index % 7 == 0 else text for index, text in enumerate(texts)]
    assert refusing(marked, threads) == [None if index % 7 == 0 else ids for index, ids in enumerate(expected)]


class _Stop(Exception):
    """What the test's signal handler raises."""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.parametrize("threads", [1, 2, 8])
def test_batch_stops_on_a_signal(threads):
    """A signal handler that raises during a long batch stops it (the C batch runs the
    handlers between its runs of texts; its helper threads are stopped and joined, nothing
    leaks or crashes); the encoding works afterwards."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encode_many = enc._core_bpe._encode_many
    texts = [f"text {i} " + "word " * 4000 for i in range(2000)]  # 40 MB: far longer than 5 ms

    def stop(signum, frame):
        raise _Stop()

    # With the collector on, a collection set off by the batch's allocations can run a gc
    # callback (hypothesis installs one); the handler then raises inside that callback, where
    # CPython reports the exception as unraisable and drops it, and the batch never sees it.
    collector_was_on = gc.isenabled()
    gc.disable()
    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.005)
        with pytest.raises(_Stop):
            encode_many(texts, threads)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if collector_was_on:
            gc.enable()
    assert encode_many(texts[:3], threads) == [enc.encode_ordinary(text) for text in texts[:3]]
