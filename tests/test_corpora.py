"""Differential tests on the real corpora in ../shared/corpora (skipped only when it is absent).

For every corpus file and each of the five main encodings:
- the whole file, cut into ~64k-character chunks at line ends: `encode_ordinary` ids equal
  tiktoken's (0 mismatches), and decode gives the chunk back; for two encodings also the
  whole file in a single call;
- documents (blank-line separated): `encode` with default arguments (same ids, or the same
  ValueError where a document holds special-token text) and with allowed_special="all";
- a sample of lines cut at a random byte (often inside a multibyte character):
  `_encode_bytes` equals tiktoken's.
"""
from __future__ import annotations

import random

import pytest

from support import CORPORA_DIR, CORPUS_FILES, MAIN_ENCODINGS, chunks_of, corpus_documents

# Any other corpus file that appears in ../shared/corpora is tested too (MANIFEST.txt included).
_EXTRA = sorted(p.name for p in CORPORA_DIR.glob("*.txt") if p.name not in CORPUS_FILES) if CORPORA_DIR.is_dir() else []
FILES = CORPUS_FILES + _EXTRA


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def describe_mismatch(ours, theirs, got: list[int], want: list[int]) -> str:
    """Where two id lists first differ, with the tokens' bytes and the text before."""
    i = first_difference(got, want)
    before = theirs.decode(want[max(0, i - 5) : i])
    return (
        f"first mismatch at token {i}: ours {got[i : i + 5]} ({ours.decode_tokens_bytes(got[i : i + 5])}), "
        f"tiktoken {want[i : i + 5]} ({theirs.decode_tokens_bytes(want[i : i + 5])}), after {before!r}"
    )


@pytest.fixture(scope="module")
def corpus_text(corpora):
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            cache[name] = (corpora / name).read_text(encoding="utf-8")
        return cache[name]

    return get


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@pytest.mark.parametrize("corpus", FILES)
def test_whole_file_encode_ordinary(corpus, name, corpus_text, encoding, reference):
    """The whole corpus file, chunk by chunk: identical ids, and decode restores each chunk."""
    ours, theirs = encoding(name), reference(name)
    chunks = chunks_of(corpus_text(corpus), 64_000)
    assert sum(map(len, chunks)) == len(corpus_text(corpus))
    total = 0
    for chunk in chunks:
        got, want = ours.encode_ordinary(chunk), theirs.encode_ordinary(chunk)
        assert got == want, describe_mismatch(ours, theirs, got, want)
        assert ours.decode(got) == chunk
        total += len(want)
    assert total > 0


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_whole_file_in_one_call(corpus, name, corpus_text, encoding, reference):
    """The whole file as one string (megabytes in one call): identical ids."""
    ours, theirs = encoding(name), reference(name)
    text = corpus_text(corpus)
    got, want = ours.encode_ordinary(text), theirs.encode_ordinary(text)
    assert got == want, describe_mismatch(ours, theirs, got, want)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@pytest.mark.parametrize("corpus", FILES)
def test_documents_encode(corpus, name, corpus_text, encoding, reference):
    """Every document: encode() with default arguments (ids or the same ValueError) and with
    allowed_special="all"."""
    ours, theirs = encoding(name), reference(name)
    docs = corpus_documents(corpus_text(corpus))
    assert len(docs) > 1 or corpus not in CORPUS_FILES
    for doc in docs:
        try:
            want = theirs.encode(doc)
        except ValueError as exc:
            with pytest.raises(ValueError) as mine:
                ours.encode(doc)
            assert str(mine.value) == str(exc)
            assert ours.encode(doc, allowed_special="all") == theirs.encode(doc, allowed_special="all")
            continue
        got = ours.encode(doc)
        assert got == want, describe_mismatch(ours, theirs, got, want)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@pytest.mark.parametrize("corpus", CORPUS_FILES)
def test_truncated_lines_encode_bytes(corpus, name, corpus_text, encoding, reference):
    """2,000 lines per file cut at a random byte: _encode_bytes equals tiktoken's."""
    ours, theirs = encoding(name), reference(name)
    lines = [line for line in corpus_text(corpus).splitlines() if line.strip()]
    rng = random.Random(corpus + name)
    for line in rng.sample(lines, min(2000, len(lines))):
        data = line.encode("utf-8")
        data = data[: rng.randint(1, len(data))]
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), data


def test_corpus_files_present(corpora, corpus_text):
    """With ../shared present, all four corpus files are there and hold many documents."""
    for corpus in CORPUS_FILES:
        assert len(corpus_documents(corpus_text(corpus))) > 1000, corpus
