"""Build glue: setuptools compiles csrc/ through cffi (see tiktoken_inc/_ffi_build.py).

Without cffi, setuptools would ignore `cffi_modules` (with a warning) and install a package
without its C core, which fails only at import; the build stops here instead.
"""
from setuptools import setup

try:
    import cffi  # noqa: F401  (setuptools finds its build step through the cffi package)
except ImportError:
    raise SystemExit(
        "tiktoken_inc needs cffi (>= 1.15) to build its C core, and cffi is not importable here. "
        "Install it first (pip install cffi), or build with build isolation (pip install . / "
        "python -m build without --no-build-isolation), which installs it."
    ) from None

setup(cffi_modules=["tiktoken_inc/_ffi_build.py:ffibuilder"])
