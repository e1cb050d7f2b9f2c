"""An allocation failure inside the C core is a MemoryError, and the encoding stays usable.

The child process caps its own address space (RLIMIT_AS) a little above what it uses, then
encodes 64 Mi characters of "a" in one shot: the C core's output and step arrays (about
12 bytes per input byte) cannot be allocated.  The C core reports it, Python raises
MemoryError, and the same Encoding then encodes normally.  Streaming (count_tokens) needs
only the window, so it succeeds under the same cap.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import resource
    import tiktoken_inc

    enc = tiktoken_inc.get_encoding("cl100k_base")
    big = "a" * (64 << 20)

    def vm_size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    limit = vm_size() + (400 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        enc.encode_ordinary(big)
        print("encode: no error")
    except MemoryError as error:
        print("encode: MemoryError:", error)
    print("count:", enc.count_tokens(big))
    print("after:", enc.encode_ordinary("hello world"))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_allocation_failure_is_memory_error_and_encoding_stays_usable(tmp_path):
    # cwd: outside the source tree, so the child imports the installed package.
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("encode: MemoryError: encoding failed: out of memory"), lines
    assert lines[1].startswith("count: ") and int(lines[1].split()[1]) > 0  # streamed: no error
    assert lines[2] == "after: [15339, 1917]"


LIST_CHILD = textwrap.dedent(
    """
    import _testcapi
    import tiktoken_inc

    enc = tiktoken_inc.get_encoding("cl100k_base")
    failed = succeeded = 0
    for round, k in enumerate(list(range(1, 40)) + [60, 95, 110, 130, 300, 590, 640, 700, 5000]):
        # Each round's texts mostly have ids no call has made an int for yet (the lists'
        # ints are made as they are first needed), a short list and a long one.
        base = 20000 + 700 * round
        for text in (enc.decode(list(range(base, base + 100))), enc.decode(list(range(base + 100, base + 700)))):
            expected = enc.encode_to_numpy(text)  # (no Python int of an id is made)
            _testcapi.set_nomemory(k, k + 1)  # the k-th allocation from here fails
            try:
                ids = enc.encode_ordinary(text)
            except MemoryError:
                ids = None
            finally:
                _testcapi.remove_mem_hooks()
            if ids is None:
                failed += 1
            else:
                succeeded += 1
                assert ids == expected.tolist(), (k, len(ids))
    print("failed:", failed, "succeeded:", succeeded)
    print("after:", enc.encode_ordinary("hello world"))
    """
)


def test_list_of_ids_allocation_failures(tmp_path):
    """An allocation that fails while a list of ids is made (its array, an int, the list) is a
    MemoryError, with no item of the half-made list released twice or read unset: under
    CPython's debug allocator, which marks freed and unwritten memory."""
    pytest.importorskip("_testcapi")
    pytest.importorskip("numpy")
    env = dict(os.environ, PYTHONMALLOC="debug")
    result = subprocess.run(
        [sys.executable, "-c", LIST_CHILD], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    words = lines[0].split()
    assert words[0] == "failed:" and int(words[1]) > 0 and int(words[3]) > 0, lines
    assert lines[1] == "after: [15339, 1917]", lines
