"""Callers that do unusual things with the objects, not the text: each must get an exception
or the right ids, never a crash or wrong ids.

- two threads feeding one stream encoder (or one stream decoder): the second gets
  RuntimeError while the first's call is under way, and the stream stays exact;
- a stream encoder after an error (a MemoryError, invalid UTF-8, a disallowed special):
  every later call raises, saying it failed earlier, and returns nothing;
- a signal handler that encodes, firing every 0.3 ms while the main thread encodes with
  special tokens allowed: every main-thread result is the known one (a per-thread output
  buffer shared by a call and its interrupter once gave thousands of wrong ids);
- an encode (and a stream, a bounded count, a batch) in a thread whose stack is 128 KiB
  (musl's default size) or 64 KiB.
"""
from __future__ import annotations

import signal
import sys
import threading

import pytest

import tiktoken_inc
from support import OUTSIDE_TREE
from tiktoken_inc.streaming import InvalidUTF8Error


@pytest.mark.parametrize("repeat, feeds", [(20_000, 20), (250, 300)], ids=["260KB", "3KB"])
def test_two_threads_on_one_stream_encoder(repeat, feeds):
    """Feeding one stream from two threads raises RuntimeError in one of them (the C stream's
    busy flag), never crashes; what each thread was given back is still exact when the
    threads take turns.  Chunks of 3 KB take the ids buffer the binding keeps between calls
    (a second caller meanwhile allocates its own); chunks of 260 KB allocate theirs."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder()
    chunk = "hello world, " * repeat  # long enough that the GIL is released during the feed
    errors: list[BaseException] = []
    results: list[list[int]] = []
    start = threading.Barrier(2)

    def feed() -> None:
        start.wait()
        for _ in range(feeds):
            try:
                results.append(encoder.feed(chunk))
            except RuntimeError as error:
                errors.append(error)

    threads = [threading.Thread(target=feed) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all("another thread" in str(error) for error in errors)
    assert len(results) + len(errors) == 2 * feeds
    # Every feed either ran whole or was refused whole, changing nothing: the stream took
    # exactly the chunks of the feeds that ran, and gave their ids (in the order the feeds
    # ran, which the threads' lists do not record: compared as multisets).
    assert encoder.stats["bytes_fed"] == len(results) * len(chunk)
    ids = [token for part in results for token in part] + encoder.finish()
    assert sorted(ids) == sorted(enc.encode(chunk * len(results)))


def test_two_threads_on_one_stream_decoder():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    decoder = enc.stream_decoder()
    tokens = enc.encode("héllo wörld " * 20_000)
    errors: list[BaseException] = []
    texts: list[str] = []
    start = threading.Barrier(2)

    def feed() -> None:
        start.wait()
        for _ in range(20):
            try:
                texts.append(decoder.feed(tokens))
            except RuntimeError as error:
                errors.append(error)

    threads = [threading.Thread(target=feed) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all("another thread" in str(error) for error in errors)
    assert len(texts) + len(errors) == 40
    assert sorted("".join(texts) + decoder.finish()) == sorted("héllo wörld " * 20_000 * len(texts))


@pytest.mark.parametrize("failure", ["invalid utf-8", "disallowed special"])
def test_stream_refuses_everything_after_an_error(failure):
    """After any error a stream encoder raises on every call and returns no ids; it never
    goes on with part of its input dropped."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder()
    assert encoder.feed("hello ") == [15339]
    if failure == "invalid utf-8":
        with pytest.raises(InvalidUTF8Error):
            encoder.feed(b"w\xff")
    else:
        with pytest.raises(ValueError, match="disallowed special token"):
            encoder.feed("<|endoftext|>")
    for call in (lambda: encoder.feed("more text"), lambda: encoder.feed(b"more"), encoder.finish):
        with pytest.raises(ValueError, match="failed earlier"):
            call()


_OUT_OF_MEMORY = """
import resource, sys
import tiktoken_inc
enc = tiktoken_inc.get_encoding("cl100k_base")
encoder = enc.stream_encoder()
chunk = "a" * (16 << 20)  # one open piece that only grows: the stream holds it
with open("/proc/self/statm") as statm:
    used = int(statm.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (200 << 20), resource.RLIM_INFINITY))
try:
    for _ in range(64):
        encoder.feed(chunk)
except MemoryError as error:
    print("memory error:", error)
else:
    sys.exit("no MemoryError")
for call in (lambda: encoder.feed("more"), encoder.finish):
    try:
        call()
    except ValueError as error:
        assert "failed earlier" in str(error) and "MemoryError" in str(error), error
    else:
        sys.exit("a failed stream took more")
print("refused after")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_AS and /proc")
def test_stream_refuses_everything_after_a_memory_error():
    """A stream whose memory runs out (the address space capped in a child process) raises
    MemoryError, then refuses every later call."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _OUT_OF_MEMORY],
                          capture_output=True, text=True, timeout=300, cwd=OUTSIDE_TREE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "memory error:" in done.stdout and "refused after" in done.stdout


def test_signal_handler_that_encodes_cannot_change_the_ids_it_interrupts():
    """SIGALRM every 0.3 ms; the handler encodes another text with specials allowed, the
    main loop encodes its own and compares with the known ids: 0 wrong of 20,000."""
    if not hasattr(signal, "setitimer"):
        pytest.skip("no interval timers on this platform")
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text_a = "The quick brown fox <|endoftext|> jumps over the lazy dog. " * 3
    text_b = "Pack my box with five dozen liquor jugs! <|endoftext|> 12345 " * 5
    want_a = enc.encode(text_a, allowed_special="all")
    want_b = enc.encode(text_b, allowed_special="all")
    handled = 0
    wrong_in_handler = 0

    def handler(signum, frame):
        nonlocal handled, wrong_in_handler
        handled += 1
        wrong_in_handler += enc.encode(text_b, allowed_special="all") != want_b

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
    try:
        wrong = sum(enc.encode(text_a, allowed_special="all") != want_a for _ in range(20_000))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    assert handled > 100, handled  # the handler did interrupt the loop
    assert wrong == 0 and wrong_in_handler == 0, (wrong, wrong_in_handler, handled)


_SMALL_STACK = """
import sys, threading
import tiktoken_inc
enc = tiktoken_inc.get_encoding("o200k_base")
text = "Hello, world! " * 2000 + "\u4e2d\u6587 " * 500 + " " * 5000
want = enc.encode(text)
results = {}

def work():
    results["encode"] = enc.encode(text) == want
    encoder = enc.stream_encoder()
    results["stream"] = encoder.feed(text) + encoder.finish() == want
    results["count"] = enc.count_tokens(text, limit=10**6) == len(want)
    results["truncate"] = enc.truncate(text, 100)[0] == want[:100]
    results["batch"] = enc.encode_ordinary_batch([text, text], num_threads=2) == [want, want]

threading.stack_size(int(sys.argv[1]) * 1024)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(results)
sys.exit(0 if results and all(results.values()) else 1)
"""


@pytest.mark.parametrize("kib", [128, 64])
def test_encode_in_a_thread_with_a_small_stack(kib):
    """encode, a stream, a bounded count, truncate and a batch run in a thread whose stack is
    128 KiB (musl's default) and 64 KiB (in a child process: a stack overflow is a crash).
    The encoder's frame was 77 KB; 80 KiB threads crashed."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SMALL_STACK, str(kib)],
                          capture_output=True, text=True, timeout=300, cwd=OUTSIDE_TREE)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
