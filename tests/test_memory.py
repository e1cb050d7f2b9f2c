"""An allocation failure inside the C core is a MemoryError, and the encoding stays usable.

The child process caps its own address space (RLIMIT_AS) a little above what it uses, then
encodes 64 Mi characters of "a" in one shot: the C core's output and step arrays (about
12 bytes per input byte) cannot be allocated.  The C core reports it, Python raises
MemoryError, and the same Encoding then encodes normally.  Streaming (count_tokens) needs
only the window, so it succeeds under the same cap.
"""
from __future__ import annotations

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
