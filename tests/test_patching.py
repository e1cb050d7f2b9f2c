"""tiktoken_inc.patch(): code that imports tiktoken runs on tiktoken_inc's core.

Checked with a real library from PyPI that calls tiktoken itself (`ttok`, in the test extra):
its output is the same patched and unpatched, and the encodings it gets are tiktoken_inc's.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import tiktoken

import tiktoken_inc
from tiktoken_inc import patching
from support import OUTSIDE_TREE


@pytest.fixture
def patched():
    tiktoken_inc.patch()
    try:
        yield
    finally:
        tiktoken_inc.unpatch()


def test_patch_gives_tiktoken_inc_encodings_that_are_tiktoken_encodings(patched, reference):
    from tiktoken import Encoding as imported_before  # noqa: F401  (as a library would)

    for enc in (tiktoken.get_encoding("cl100k_base"), tiktoken.encoding_for_model("gpt-4o"),
                tiktoken.registry.get_encoding("r50k_base"), tiktoken.model.encoding_for_model("gpt-4")):
        assert isinstance(enc, tiktoken.Encoding) and isinstance(enc, tiktoken.core.Encoding)
        assert isinstance(enc, tiktoken_inc.Encoding)
        assert enc.encode("hello world <|endoftext|>", allowed_special="all") == reference(enc.name).encode(
            "hello world <|endoftext|>", allowed_special="all"
        )
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    custom = tiktoken.Encoding("custom", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    assert isinstance(custom, tiktoken_inc.Encoding) and custom.encode("abab") == [256, 256]
    assert pickle.loads(pickle.dumps(custom)).encode("abab") == [256, 256]
    assert pickle.loads(pickle.dumps(tiktoken.get_encoding("gpt2"))).encode("hi") == [5303]
    tiktoken_inc.patch()  # idempotent
    assert patching.is_patched()


def test_unpatch_restores_tiktoken(reference):
    originals = (tiktoken.get_encoding, tiktoken.encoding_for_model, tiktoken.Encoding)
    tiktoken_inc.patch()
    tiktoken_inc.unpatch()
    assert (tiktoken.get_encoding, tiktoken.encoding_for_model, tiktoken.Encoding) == originals
    assert not patching.is_patched()
    assert type(tiktoken.get_encoding("cl100k_base")) is tiktoken.Encoding


def test_environment_variable_patches_at_import():
    code = "import tiktoken_inc, tiktoken; print(type(tiktoken.get_encoding('gpt2')).__name__)"
    env = dict(os.environ, TIKTOKEN_INC_PATCH="1")
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, check=True, cwd=OUTSIDE_TREE)
    assert out.stdout.strip() == "TiktokenEncoding"


TTOK_RUNNER = """
import sys
import tiktoken_inc
if sys.argv[1] == "patched":
    tiktoken_inc.patch()
from click.testing import CliRunner
from ttok.cli import cli
import tiktoken
runner = CliRunner()
text = open(sys.argv[2], encoding="utf-8").read()
for args in ([], ["--tokens"], ["-m", "gpt-4o"], ["-m", "gpt-4o", "--tokens"], ["-t", "5"], ["-m", "gpt-3.5-turbo", "--decode", "15339 1917"]):
    result = runner.invoke(cli, args, input=text)
    sys.stdout.write(repr(args) + " " + str(result.exit_code) + " " + repr(result.exception) + " " + result.output)
print(type(tiktoken.encoding_for_model("gpt-4o")).__name__)
"""


def test_a_library_that_uses_tiktoken_gives_the_same_output(tmp_path):
    """ttok (PyPI) counts, encodes, truncates and decodes through tiktoken.encoding_for_model."""
    pytest.importorskip("ttok")
    text = tmp_path / "text.txt"
    text.write_text("Hello world! Ünïcödé, 你好, <|endoftext\n  spaces   and 12345 digits\n" * 20, encoding="utf-8")
    runs = {}
    for mode in ("plain", "patched"):
        out = subprocess.run([sys.executable, "-c", TTOK_RUNNER, mode, str(text)],
                         capture_output=True, text=True, check=True, cwd=OUTSIDE_TREE)
        runs[mode] = out.stdout.splitlines()
    assert runs["plain"][-1] == "Encoding" and runs["patched"][-1] == "TiktokenEncoding"
    assert runs["plain"][:-1] == runs["patched"][:-1]
    assert all(" 0 None " in line for line in runs["plain"] if line.startswith("["))
