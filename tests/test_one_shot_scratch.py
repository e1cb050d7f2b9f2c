"""The one-shot ids array kept per thread (tiktoken_inc/_tki_python.c, "One-shot scratch").

A long encode_ordinary writes its ids into an array that the thread keeps for its next
call instead of a fresh one each time (a fresh multi-MiB array is faulted in page by page).
What must hold:

- ids equal tiktoken's whatever sizes came before on the thread (a kept array larger or
  smaller than the call needs, stale ids in it);
- the kept array is bounded (at most 16 MiB) and shrinks when the calls become short;
- a call that runs inside another on the same thread -- a finalizer run by the garbage
  collector while the outer call makes its list, a signal handler -- gets an array of its
  own and cannot change the outer call's ids;
- threads never share one; a forked child encodes with what it inherited.
"""
from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import tracemalloc

import pytest

import tiktoken_inc
from tiktoken_inc import _tki

KEEP_BYTES = 16 << 20


def texts() -> dict[str, str]:
    """Texts of each size class: long (scratch), short (stack), over the kept bound."""
    words = "The quick brown fox, 1234 jumps; über 中文 😀 over the lazy dog's back.\n"
    return {
        "long": (words * 20_000)[: 1 << 20],
        "other": ("Lorem ipsum dolor sit amet 42 " * 40_000)[: 700_000],
        "short": words * 20,
        "huge": "a" * (5 << 20),
    }


def in_fresh_thread(work):
    """work() run in a new thread (its own, empty scratch); its result or its exception."""
    box: dict = {}

    def run():
        try:
            box["result"] = work()
        except BaseException as error:  # (re-raised in the caller)
            box["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_ids_whatever_came_before(reference):
    """Long, short, over-the-bound and long again on one thread: each call's ids are
    tiktoken's (a kept array holds the last call's ids; the next call must not read them)."""
    enc, theirs = tiktoken_inc.get_encoding("cl100k_base"), reference("cl100k_base")
    sample = texts()
    expected = {name: theirs.encode_ordinary(text) for name, text in sample.items() if name != "huge"}
    expected["huge"] = enc.encode_ordinary(sample["huge"])  # (tiktoken takes seconds; this thread's own call)

    def work():
        for name in ("long", "short", "other", "long", "huge", "other", "short", "long", "huge", "long"):
            assert enc.encode_ordinary(sample[name]) == expected[name], name
        return True

    assert in_fresh_thread(work)


def test_kept_array_is_bounded_and_shrinks():
    """A thread keeps the array of its last long call (at least 4 bytes per byte of that
    text), never more than 16 MiB (a 5 MiB text's array is freed after the call), and lets
    it go once its calls are far shorter for a while; a short text keeps none."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    sample = texts()

    def work():
        enc.encode_ordinary(sample["short"] * 10)  # (under 32 KiB: a fresh array, not kept)
        assert _tki.scratch_bytes() == 0
        enc.encode_ordinary(sample["long"])
        after_long = _tki.scratch_bytes()
        enc.encode_ordinary(sample["huge"])
        after_huge = _tki.scratch_bytes()
        for _ in range(64):
            enc.encode_ordinary(sample["other"][:40_000])
        after_short = _tki.scratch_bytes()
        return after_long, after_huge, after_short

    after_long, after_huge, after_short = in_fresh_thread(work)
    assert 4 * len(sample["long"]) <= after_long <= KEEP_BYTES, after_long
    assert after_huge <= KEEP_BYTES, after_huge
    assert after_short <= 1 << 20, after_short


class EncodesWhenCollected:
    """An object in a reference cycle that encodes a long text when the collector frees it."""

    def __init__(self, enc, text: str, log: list) -> None:
        self.enc, self.text, self.log = enc, text, log
        self.cycle = self

    def __del__(self) -> None:
        inside = _tki.scratch_bytes() == 0  # the outer call holds this thread's array
        self.log.append((inside, self.enc.encode_ordinary(self.text)))


def test_finalizer_inside_a_call_gets_its_own_array():
    """The collector runs while encode_ordinary makes its list (the first tracked object the
    call allocates) and the finalizer encodes another long text on the same thread: both
    calls' ids are the ones each makes alone."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    sample = texts()
    outer_expected, inner_expected = enc.encode_ordinary(sample["long"]), enc.encode_ordinary(sample["other"])
    encode = enc.encode_ordinary
    log: list = []
    threshold = gc.get_threshold()
    try:
        for _ in range(20):
            encode(sample["long"])  # (the thread keeps an array)
            # Lists made now and kept empty CPython's free list of lists, so that the call's
            # list is a new tracked object, whose allocation runs the collector.
            lists = [[] for _ in range(200)]
            EncodesWhenCollected(enc, sample["other"], log)
            gc.set_threshold(1)
            got = encode(sample["long"])
            gc.set_threshold(*threshold)
            del lists
            assert got == outer_expected
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert log and all(ids == inner_expected for _, ids in log)
    if sys.version_info < (3, 12):  # (later versions collect at the next bytecode, not inside the call)
        assert any(inside for inside, _ in log), "the finalizer never ran inside the call"


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_signal_handler_that_encodes():
    """A timer's handler encodes a long text while the main thread encodes others in a loop:
    every id list is the one the call makes alone."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    sample = texts()
    expected = {name: enc.encode_ordinary(sample[name]) for name in ("long", "other")}
    handled: list = []
    stopping = []

    def handler(signum, frame):
        handled.append(enc.encode_ordinary(sample["other"]) == expected["other"])
        if not stopping:
            signal.setitimer(signal.ITIMER_REAL, 0.001)  # (the next, once this one is done)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.001)
        for _ in range(30):
            assert enc.encode_ordinary(sample["long"]) == expected["long"]
            assert enc.encode_ordinary(sample["short"]) == enc.encode_ordinary(sample["short"])
    finally:
        stop_rearming_timer(stopping, previous)
    assert handled and all(handled)


def stop_rearming_timer(stopping: list, previous) -> None:
    """Stops a timer whose SIGALRM handler arms it again, and puts `previous` back.  A signal
    that arrived just before can run its handler at any later bytecode: told to stop first,
    it arms nothing, and it finds SIG_IGN, not the default action (which ends the process:
    "Alarm clock"), where the timer was stopped between its signal and its handler."""
    stopping.append(True)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_threads_keep_their_own():
    """Eight threads encode texts of different lengths at once, each many times: every
    result equals the serial one (a shared array would mix their ids)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    base = texts()["long"]
    inputs = [base[i * 1000: i * 1000 + 50_000 + 37_000 * i] for i in range(8)]
    expected = [enc.encode_ordinary(text) for text in inputs]
    failures: list = []
    barrier = threading.Barrier(len(inputs))

    def work(index: int) -> None:
        barrier.wait()
        for round_ in range(6):
            pick = (index + round_) % len(inputs)
            if enc.encode_ordinary(inputs[pick]) != expected[pick]:
                failures.append((index, pick))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_encodes_with_what_it_inherited():
    """A child forked after the parent kept an array encodes long and short texts exactly."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    sample = texts()
    expected = [enc.encode_ordinary(sample[name]) for name in ("long", "other", "short")]
    assert _tki.scratch_bytes() > 0
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if every call matched
        ok = all(enc.encode_ordinary(sample[name]) == ids for name, ids in zip(("long", "other", "short"), expected))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --------------------------------------------------------------------------- stream feeds
# A feed of a few KiB (more ids than fit on the stack) writes its ids into this thread's
# feed array (tiktoken_inc/_tki_python.c, feed_scratch_take), taken out for the call.

FEED_TEXT = ("The quick brown fox, 1234 jumps over the lazy dog's back. " * 400).encode()
FEED_BYTES = 3000  # (more than the 1,024 ids the stack holds: the feed array)


class FeedsWhenCollected:
    """An object in a reference cycle that, when the collector frees it, streams a chunk
    through a new stream encoder and logs whether the ids are the chunk's."""

    def __init__(self, enc, chunk: bytes, log: list) -> None:
        self.enc, self.chunk, self.log = enc, chunk, log
        self.cycle = self

    def __del__(self) -> None:
        encoder = self.enc.stream_encoder()
        ids = encoder.feed(self.chunk) + encoder.finish()
        self.log.append(ids == self.enc.encode_ordinary(self.chunk.decode()))


def test_finalizer_inside_a_feed_gets_its_own_array():
    """The collector runs while a feed of a few KiB makes its list, and the finalizer streams
    another chunk on the same thread: the outer stream's ids are those it makes alone."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    chunks = [FEED_TEXT[i:i + FEED_BYTES] for i in range(0, len(FEED_TEXT), FEED_BYTES)]
    expected = enc.encode_ordinary(FEED_TEXT.decode())
    log: list = []
    threshold = gc.get_threshold()
    outer = enc.stream_encoder()
    got: list = []
    try:
        for chunk in chunks:
            lists = [[] for _ in range(200)]  # (empties the free list: the feed's list is new)
            FeedsWhenCollected(enc, chunk[::-1], log)
            gc.set_threshold(1)
            got += outer.feed(chunk)
            gc.set_threshold(*threshold)
            del lists
        got += outer.finish()
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert got == expected
    assert log and all(log)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_signal_handler_that_streams():
    """A timer's handler streams a chunk of a few KiB while the main thread feeds a stream
    such chunks in a loop: every stream's ids are the ones it makes alone."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    chunks = [FEED_TEXT[i:i + FEED_BYTES] for i in range(0, len(FEED_TEXT), FEED_BYTES)]
    expected = enc.encode_ordinary(FEED_TEXT.decode())
    inner = FEED_TEXT[:FEED_BYTES][::-1]
    inner_expected = enc.encode_ordinary(inner.decode())
    handled: list = []
    stopping = []

    def handler(signum, frame):
        encoder = enc.stream_encoder()
        handled.append(encoder.feed(inner) + encoder.finish() == inner_expected)
        if not stopping:
            signal.setitimer(signal.ITIMER_REAL, 0.0002)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0002)
        for _ in range(40):
            encoder = enc.stream_encoder()
            got = [token for chunk in chunks for token in encoder.feed(chunk)] + encoder.finish()
            assert got == expected
    finally:
        stop_rearming_timer(stopping, previous)
    assert handled and all(handled)


def test_streams_fed_a_few_kib_keep_no_array_each():
    """The feed array is the thread's, not each stream's: many streams, each fed a few KiB
    once and kept, hold no ids array of their own (32 KiB each when a stream kept one)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    chunk = FEED_TEXT[:4096]
    enc.stream_encoder().feed(chunk)  # (the thread's array made)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        streams = []
        for _ in range(200):
            encoder = enc.stream_encoder()
            encoder.feed(chunk)
            streams.append(encoder)
        per_stream = (tracemalloc.get_traced_memory()[0] - before) / len(streams)
    finally:
        tracemalloc.stop()
    assert per_stream < 8 << 10, per_stream
