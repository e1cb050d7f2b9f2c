"""The command line (tiktoken_inc/__main__.py): --version, its documented examples, decode --errors."""
from __future__ import annotations

import io
import re

import pytest

import tiktoken_inc
from tiktoken_inc import __main__ as cli


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert tiktoken_inc.__version__ in capsys.readouterr().out


def test_docstring_examples_match_the_default_encoding(capsysbinary, monkeypatch):
    """Each `$ echo "..." | python -m tiktoken_inc CMD` example of the module docstring gives
    the output written under it."""
    examples = re.findall(r'\$ echo "([^"]*)" \| python -m tiktoken_inc (\w+)\n([^\n$]+)\n', cli.__doc__)
    assert len(examples) == 2
    for text, command, expected in examples:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((text + "\n").encode())))
        assert cli.main([command]) == 0
        assert capsysbinary.readouterr().out.decode().strip() == expected
    assert cli.DEFAULT_ENCODING == "o200k_base"


def test_decode_errors_default_to_replace(capsysbinary, monkeypatch):
    enc = tiktoken_inc.get_encoding("o200k_base")
    ids = f"{enc.encode_single_token('hello')} {enc.encode_single_token(bytes([0xFF]))}\n"
    for argv, expected in (([], "hello\ufffd".encode()), (["--errors", "surrogateescape"], b"hello\xff"),
                           (["--errors", "ignore"], b"hello")):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ids.encode())))
        assert cli.main(["decode", *argv]) == 0
        assert capsysbinary.readouterr().out == expected
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ids.encode())))
    assert cli.main(["decode", "--errors", "strict"]) == 2
    assert b"not UTF-8" in capsysbinary.readouterr().err
