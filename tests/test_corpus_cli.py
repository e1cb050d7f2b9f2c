"""The corpus command, `tiktoken-inc encode --output OUT.bin ...`, and the print mode beside it.

Every run is read back the way a training script reads it (`np.fromfile` of OUT.bin and
OUT.idx) and each document's ids must equal `encode_ordinary` of that document (plus
<|endoftext|> with --eot): files, directories (recursively, in sorted order), standard
input, --lines, u16 and u32.  Errors (u16 with ids that do not fit, text that is not UTF-8,
a missing input, options of the other mode) exit with status 2 and a one-line message, and
leave no output behind.  The groups and blocks are made small here, so that the pipeline's
queues, blocks cut at newlines and offsets across groups are all exercised.
"""
from __future__ import annotations

import io
import os
import random
import sys
import time

import pytest

import tiktoken_inc
from support import CORPUS_FILES, corpus_documents
from tiktoken_inc import corpus
from tiktoken_inc.__main__ import main

np = pytest.importorskip("numpy")


@pytest.fixture(autouse=True)
def small_groups(monkeypatch):
    """Groups of 64 KiB and line blocks of 4 KiB: many of each, even on small inputs."""
    monkeypatch.setattr(corpus, "GROUP_BYTES", 64 << 10)
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 4 << 10)


def read_back(output, id_format: str = "u32") -> list[list[int]]:
    """The documents of OUT.bin / OUT.idx, as a training script reads them."""
    ids = np.fromfile(output, dtype="<u2" if id_format == "u16" else "<u4")
    offsets = np.fromfile(os.path.splitext(output)[0] + ".idx", dtype="<i8")
    assert offsets[0] == 0 and offsets[-1] == len(ids) and np.all(np.diff(offsets) >= 0)
    return [ids[start:end].tolist() for start, end in zip(offsets[:-1], offsets[1:])]


def run(argv: list[str], stdin: bytes = b"", monkeypatch=None) -> int:
    if monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return main(argv)


def random_text(rng: random.Random, size: int) -> str:
    alphabet = "ab cd\n\t'0123中文😀é<|>" + "".join(map(chr, range(0x400, 0x410)))
    return "".join(rng.choice(alphabet) for _ in range(size))


def make_tree(root, rng: random.Random) -> dict[str, str]:
    """Files in nested directories (some empty, one large, one with special-token text)."""
    files = {
        "a.txt": random_text(rng, 3000),
        "b/empty.txt": "",
        "b/c/deep.txt": random_text(rng, 100_000),
        "b/c/special.txt": "x <|endoftext|> y\n",
        "b/z.md": "ends without newline",
        "c.txt": "\n\n\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return dict(sorted(files.items(), key=lambda item: item[0].split("/")))


@pytest.mark.parametrize("id_format", ["u16", "u32"])
@pytest.mark.parametrize("eot", [False, True])
def test_directory_and_files(tmp_path, id_format, eot):
    """A directory, walked in sorted order, then a file named again: one document per file."""
    enc = tiktoken_inc.get_encoding("gpt2")
    files = make_tree(tmp_path / "tree", random.Random(1))
    output = tmp_path / "out" / "train.bin"
    output.parent.mkdir()
    argv = ["encode", "-e", "gpt2", "--format", id_format, "--output", str(output), str(tmp_path / "tree"),
            str(tmp_path / "tree" / "a.txt")]
    assert run(argv + (["--eot"] if eot else [])) == 0
    texts = list(files.values()) + [files["a.txt"]]
    end = [enc.eot_token] if eot else []
    assert read_back(output, id_format) == [enc.encode_ordinary(text) + end for text in texts]
    assert sorted(os.listdir(output.parent)) == ["train.bin", "train.idx"]  # no temporary left


def test_lines(tmp_path, monkeypatch):
    """--lines: every line is a document, without its newline (empty lines too; a last line
    without a newline counts; large files are read in blocks cut at newlines, a line longer
    than a block read whole; empty files give no document)."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    rng = random.Random(2)
    big = "".join(random_text(rng, rng.randrange(0, 300)).replace("\n", " ") + "\n" for _ in range(2000))
    long_line = random_text(rng, 3 * corpus.BLOCK_BYTES).replace("\n", "\t")  # over two blocks of bytes
    big = big[:len(big) // 2] + long_line + "\n" + big[len(big) // 2:]
    (tmp_path / "big.txt").write_text(big + "last line", encoding="utf-8")
    (tmp_path / "small.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "newlines.txt").write_text("\n" * (corpus.BLOCK_BYTES + 7), encoding="utf-8")
    (tmp_path / "one_long.txt").write_text(long_line, encoding="utf-8")  # no newline at all
    output = tmp_path / "lines.bin"
    names = ["big.txt", "small.txt", "empty.txt", "newlines.txt", "one_long.txt"]
    assert run(["encode", "--lines", "--eot", "-o", str(output), *(str(tmp_path / name) for name in names)]) == 0
    lines = big.split("\n")[:-1] + ["last line", "one", "", "two"] + [""] * (corpus.BLOCK_BYTES + 7) + [long_line]
    assert long_line in lines
    assert read_back(output) == [enc.encode_ordinary(line) + [enc.eot_token] for line in lines]


def test_groups_finishing_out_of_order(tmp_path, monkeypatch):
    """Groups are encoded ENCODERS at a time and may finish in any order: each is written in
    the input's order, its offsets moved to where its ids land; no more than WINDOW_GROUPS
    exist at once."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    rng = random.Random(5)
    texts = [random_text(rng, rng.randrange(0, 40_000)) for _ in range(24)]
    for index, text in enumerate(texts):
        (tmp_path / f"{index:02}.txt").write_text(text, encoding="utf-8")
    encode_flat = type(enc)._encode_flat
    calls = []
    live = [0, 0]  # groups encoding now, the most at once

    def slow_then_fast(self, group, **options):
        calls.append(options)
        live[0] += 1
        live[1] = max(live)
        if len(calls) % 3 == 1:
            time.sleep(0.05)  # this group finishes after the next one
        try:
            return encode_flat(self, group, **options)
        finally:
            live[0] -= 1

    monkeypatch.setattr(type(enc), "_encode_flat", slow_then_fast)
    output = tmp_path / "out" / "ordered.bin"
    output.parent.mkdir()
    stats = corpus.write_corpus(enc, [str(tmp_path)], str(output), eot=True, progress=False)
    assert len(calls) > 6 and live[1] == corpus.ENCODERS
    assert all(options.get("first_offset", 0) == 0 for options in calls)
    assert read_back(output) == [enc.encode_ordinary(text) + [enc.eot_token] for text in texts]
    assert stats.documents == len(texts) and stats.tokens == sum(len(enc.encode_ordinary(t)) + 1 for t in texts)


def test_first_error_in_input_order(tmp_path, capsys):
    """Two groups that are not UTF-8, encoded at once: the earlier input's error is said."""
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"x" * 100_000 + b"\xff")
    second.write_bytes(b"\xfe")
    output = tmp_path / "out" / "x.bin"
    output.parent.mkdir()
    for _ in range(5):
        assert run(["encode", "-o", str(output), str(first), str(second)]) == 2
        assert f"{first}: not UTF-8 text (byte 100000 is 0xff)" in capsys.readouterr().err
        assert os.listdir(output.parent) == []


@pytest.mark.parametrize("in_c", [True, False])
def test_add_to_offsets(monkeypatch, in_c):
    """The offsets of a group moved by the tokens before it, in C and in the Python fallback."""
    from array import array

    from tiktoken_inc import _native

    if not in_c:
        monkeypatch.setattr(_native, "_python_functions", None)
    offsets = bytearray(array("q", [0, 3, 3, 2**40]))
    _native.add_to_offsets(offsets, 7)
    assert array("q", offsets).tolist() == [7, 10, 10, 2**40 + 7]
    empty = bytearray()
    _native.add_to_offsets(empty, 5)
    assert empty == bytearray()
    if in_c:
        with pytest.raises(OverflowError):
            _native.add_to_offsets(bytearray(array("q", [2**63 - 5])), 10)
        with pytest.raises(ValueError):
            _native.add_to_offsets(bytearray(7), 1)


@pytest.mark.parametrize("lines", [False, True])
def test_standard_input(tmp_path, monkeypatch, lines):
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text = random_text(random.Random(3), 50_000)
    output = tmp_path / "stdin.bin"
    argv = ["encode", "-e", "cl100k_base", "--output", str(output), "-"] + (["--lines"] if lines else [])
    assert run(argv, text.encode(), monkeypatch) == 0
    documents = text.split("\n") if lines else [text]
    if lines and documents[-1] == "":
        documents.pop()
    assert read_back(output) == [enc.encode_ordinary(doc) for doc in documents]


def test_allow_special(tmp_path, monkeypatch):
    enc = tiktoken_inc.get_encoding("cl100k_base")
    output = tmp_path / "special.bin"
    text = "a <|endoftext|> b <|fim_prefix|>"
    assert run(["encode", "-e", "cl100k_base", "--allow-special", "-o", str(output)], text.encode(), monkeypatch) == 0
    assert read_back(output) == [enc.encode(text, allowed_special="all")]
    assert run(["encode", "-e", "cl100k_base", "-o", str(output)], text.encode(), monkeypatch) == 0
    assert read_back(output) == [enc.encode_ordinary(text)]


def test_no_pretokenize(tmp_path, monkeypatch):
    enc = tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)
    output = tmp_path / "one_piece.bin"
    assert run(["encode", "-e", "cl100k_base", "--no-pretokenize", "--lines", "-o", str(output)],
               b"hello world\nsecond line\n", monkeypatch) == 0
    assert read_back(output) == [enc.encode_ordinary("hello world"), enc.encode_ordinary("second line")]


def test_corpora_round_trip(tmp_path, corpora):
    """The four corpora, as files and line by line: each document's ids are encode_ordinary's."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    paths = [str(corpora / name) for name in CORPUS_FILES]
    output = tmp_path / "corpora.bin"
    assert run(["encode", "-o", str(output), *paths]) == 0
    texts = [(corpora / name).read_text(encoding="utf-8") for name in CORPUS_FILES]
    assert read_back(output) == enc.encode_ordinary_batch(texts)
    assert run(["encode", "--lines", "--eot", "-o", str(output), *paths]) == 0
    lines = [line for text in texts for line in text.split("\n")[:-1 if text.endswith("\n") else None]]
    assert read_back(output) == [ids + [enc.eot_token] for ids in enc.encode_ordinary_batch(lines)]
    documents = [doc for text in texts for doc in corpus_documents(text)]
    assert len(documents) > 100


def test_u16_refuses_wide_encodings(tmp_path, capsys):
    """u16 with an encoding whose ids do not fit: status 2 before anything is read or written."""
    output = tmp_path / "wide.bin"
    assert run(["encode", "-e", "cl100k_base", "--format", "u16", "-o", str(output), str(tmp_path / "missing")]) == 2
    error = capsys.readouterr().err
    assert "cl100k_base has ids up to 100276, which do not fit u16" in error and "--format u32" in error
    assert not output.exists()


def test_errors(tmp_path, capsys, monkeypatch):
    """One-line errors with status 2, and no output left behind."""
    good = tmp_path / "good.txt"
    good.write_text("fine\n" * 1000, encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\n" * 2000 + b"caf\xc3 here\n")
    output = tmp_path / "out" / "x.bin"
    output.parent.mkdir()
    cases = [
        (["encode", "-o", str(output), str(good), str(bad)], f"{bad}: not UTF-8 text (byte 20003 is 0xc3)"),
        (["encode", "--lines", "-o", str(output), str(bad)], f"{bad}: not UTF-8 text (byte 20003 is 0xc3)"),
        (["encode", "-o", str(output), str(tmp_path / "nope")], "no such file or directory"),
        (["encode", "-o", str(tmp_path / "no_dir" / "x.bin"), str(good)], "cannot write"),
        (["encode", "-o", str(tmp_path / "x.idx"), str(good)], "must not end in .idx"),
        (["encode", "--format", "u16", str(good)], "--format needs --output"),
        (["encode", "--eot", str(good)], "--eot needs --output"),
        (["encode", str(good), str(good)], "several inputs need --output"),
        (["encode", "--stream", "-o", str(output), str(good)], "--stream"),
        (["encode", "--threads", "0", "-o", str(output), str(good)], "--threads must be at least 1"),
        (["encode", "-e", "gpt2", "--format", "u16", "-o", str(output), str(tmp_path)], "not UTF-8"),
    ]
    for argv, message in cases:
        assert run(argv) == 2, argv
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1, (argv, error)
        assert os.listdir(output.parent) == [], argv


def test_print_mode_unchanged(tmp_path, capsysbinary, monkeypatch):
    """Without --output, encode prints the ids of one input as before (--lines: one per line)."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    assert run(["encode"], b"hello world\n", monkeypatch) == 0
    assert capsysbinary.readouterr().out == " ".join(map(str, enc.encode_ordinary("hello world\n"))).encode() + b"\n"
    assert run(["encode", "--lines", "-e", "gpt2", "-"], b"hello world", monkeypatch) == 0
    assert capsysbinary.readouterr().out == b"31373\n995\n"
    (tmp_path / "f.txt").write_text("<|endoftext|>", encoding="utf-8")
    assert run(["encode", "-e", "gpt2", "--allow-special", str(tmp_path / "f.txt")]) == 0
    assert capsysbinary.readouterr().out == b"50256\n"


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch):
    """No bar when stderr is not a terminal; on one, a tqdm bar (when tqdm is installed)
    that counts bytes and shows documents and tokens per second."""
    assert corpus._progress(10) is None  # pytest's stderr is no terminal
    tqdm = pytest.importorskip("tqdm")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(stream, "isatty", lambda: True, raising=False)
    (tmp_path / "t.txt").write_text("hello world\n" * 10_000, encoding="utf-8")
    stats = corpus.write_corpus(tiktoken_inc.get_encoding("gpt2"), [str(tmp_path / "t.txt")], str(tmp_path / "o.bin"))
    shown = stream.getvalue()
    assert stats.bytes == 120_000 and stats.documents == 1 and stats.tokens == 30_000
    assert "docs/s" in shown and "tokens/s" in shown and "117k" in shown.replace("117.2k", "117k"), shown
    assert isinstance(tqdm.__version__, str)
