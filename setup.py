"""Build glue: setuptools compiles csrc/ through cffi (see tiktoken_inc/_ffi_build.py)."""
from setuptools import setup

setup(cffi_modules=["tiktoken_inc/_ffi_build.py:ffibuilder"])
