"""Build glue: setuptools compiles csrc/ through cffi (see tiktoken_inc/_ffi_build.py).

Without cffi, setuptools would ignore `cffi_modules` (with a warning) and install a package
without its C core, which fails only at import; the build stops here instead.  An older
setuptools than pyproject.toml asks for (a venv's own, in `python setup.py build_ext
--inplace`) would fail on the SPDX license expression with a schema error; it stops here
with what to do.
"""
import setuptools
from setuptools import setup

if int(setuptools.__version__.split(".")[0]) < 77:
    raise SystemExit(
        f"tiktoken_inc needs setuptools >= 77 to read its pyproject.toml (the license is an SPDX "
        f"expression), and this one is {setuptools.__version__}: pip install -U 'setuptools>=77'. "
        "(pip install . and python -m build fetch it themselves.)"
    )

try:
    import cffi  # noqa: F401  (setuptools finds its build step through the cffi package)
except ImportError:
    raise SystemExit(
        "tiktoken_inc needs cffi (>= 1.15) to build its C core, and cffi is not importable here. "
        "Install it first (pip install cffi), or build with build isolation (pip install . / "
        "python -m build without --no-build-isolation), which installs it."
    ) from None

setup(cffi_modules=["tiktoken_inc/_ffi_build.py:ffibuilder"])
