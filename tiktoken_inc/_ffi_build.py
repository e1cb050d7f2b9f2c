"""cffi (API mode) description of the C core in csrc/; `pip install .` compiles it."""
from __future__ import annotations

import os
import re
from pathlib import Path

from cffi import FFI

_ROOT = Path(__file__).resolve().parent.parent
_CSRC = _ROOT / "csrc"


def _cdef_from_header(header: str) -> str:
    """The header minus what cffi's parser does not take (preprocessor lines, extern "C")."""
    text = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#define TKI_"):
            name = stripped.split()[1]
            lines.append(f"#define {name} ...")
        elif stripped.startswith("#") or stripped in ('extern "C" {', "}") and "typedef" not in line:
            continue
        else:
            lines.append(line)
    return "\n".join(lines)


def _lto_works() -> bool:
    """Whether the C compiler setuptools will use links with -flto (a gcc whose LTO plugin
    cannot run with the system linker fails there).  TKI_LTO=0 turns LTO off outright."""
    if os.environ.get("TKI_LTO", "1") == "0":
        return False
    import shlex
    import subprocess
    import sysconfig
    import tempfile

    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "probe.c"
        source.write_text("static int twice(int x) { return 2 * x; }\nint main(void) { return twice(0); }\n")
        try:
            result = subprocess.run(
                [*compiler, "-O2", "-flto", str(source), "-o", str(Path(scratch) / "probe")],
                capture_output=True, timeout=120,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0


_LTO = ["-flto"] if _lto_works() else []
if not _LTO:
    import warnings

    warnings.warn(
        "tiktoken_inc: the C compiler cannot link with -flto here; building without link-time "
        "optimization (the ids are the same; encoding is a little slower)",
        stacklevel=1,
    )

ffibuilder = FFI()
ffibuilder.cdef(_cdef_from_header((_CSRC / "tiktoken_inc.h").read_text()))
# tiktoken_inc/_tki_python.c: adds the functions that take Python objects to the module.
ffibuilder.cdef("int32_t tki_python_install(void);")
_sources = sorted(str(p.relative_to(_ROOT)) for p in _CSRC.glob("*.c"))
# For instrumented builds (.ci/sanitize.sh): extra compiler and linker flags.
_extra = os.environ.get("TKI_EXTRA_CFLAGS", "").split()
_extra_link = os.environ.get("TKI_EXTRA_LDFLAGS", "").split()
ffibuilder.set_source(
    "tiktoken_inc._tki",
    '#include "tiktoken_inc.h"\n#include "_tki_python.c"',
    sources=_sources,
    include_dirs=[str(_CSRC.relative_to(_ROOT)), "tiktoken_inc"],
    # Included, not compiled on their own: a change to one of them rebuilds the module.
    depends=[*sorted(str(p.relative_to(_ROOT)) for p in _CSRC.glob("*.h")),
             "tiktoken_inc/_tki_python.c", "tiktoken_inc/_tki_str_utf8.c", "tiktoken_inc/_tki_batch.c",
             "tiktoken_inc/_tki_stream.c"],
    py_limited_api=False,  # _tki_python.c reads str's UTF-8 and fills lists directly
    # Hidden visibility: the module exports PyInit__tki only, so calls inside the core
    # are direct, not through the PLT.  Link-time optimization: calls between the core's
    # files may be inlined (the pre-tokenizer's ASCII shortcut, which the encoder's batch
    # loop calls per piece, is inlined through its header, csrc/pretokenize_ascii.h).
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", *_LTO, "-Wall", "-Wextra", *_extra],
    extra_link_args=[*_LTO, *_extra_link],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
