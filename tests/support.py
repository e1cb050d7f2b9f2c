"""Constants and small helpers shared by the test modules (paths, encoding lists, corpus slicing)."""
from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPORA_DIR = REPO_ROOT.parent / "shared" / "corpora"
#: The working directory for child processes (and Ray workers): outside the source tree, so that
#: `python -c` imports the installed package, not the unbuilt sources of a clean clone.
OUTSIDE_TREE = tempfile.gettempdir()

#: The encodings tested in depth, and the two tested lightly.
MAIN_ENCODINGS = ["r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"]
LIGHT_ENCODINGS = ["o200k_harmony", "gpt2"]
ALL_ENCODINGS = MAIN_ENCODINGS + LIGHT_ENCODINGS
#: The distinct rank files (the vocabularies the core is built from).
RANK_FILES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
#: Corpus files the differential tests expect to find in ../shared/corpora.
CORPUS_FILES = ["english.txt", "chinese.txt", "code.txt", "multilingual.txt"]

#: A character of each class the built-in patterns tell apart (csrc/stream.c's probe
#: characters among them): the runs whose probes and cuts the streams answer once.
RUN_PROBE_CHARACTERS = [
    "a", "A", "0", "5", " ", "\n", "\r", "\t", "\x0b", "\x0c", "!", "'", "/", "x", "s", "t", "+", "_", ",",
    ".", "\u00e9", "\u0301", "\u01c5", "\u02b0", "\u4e2d", "\u00a0", "\u00b2", "\u2028", "\u2029", "\u017f",
    "\u00c0", "\u20ac", "\u3000", "\u0085", "\u2167", "\u0660", "\u0915", "\u093f", "\U0001F600",
]

#: Fragments of text for the 64-byte windows that split a stream's pending text: ASCII words,
#: numbers and punctuation (so that windows decide pieces), and what moves a piece end near
#: the end of the text -- whitespace runs, contractions and their apostrophes, letters of
#: either case, and non-ASCII characters next to ASCII: combining marks and modifier letters
#: (o200k's \p{M}, \p{Lm}), a title-case letter, CJK, no-break and ideographic spaces.
WINDOW_FRAGMENTS = [
    "word", " the", " Word", "HTML", "x", "A", "s", "  ", "    ", " \t", "\t", "\n", "\r\n", "\n\n  ",
    "'s", "'ll", "'RE", "'t", "'", "'v", "123", "4567", "/", "//", ".", "!?", "(", " {", ")\n",
    "\u0301", "\u02b0", "\u01c5", "\u00e9", "\u00a0", "\u3000", "\u4e2d\u6587", "\u00b2", "\U0001f600",
]

#: Where tiktoken fetches a rank file from; its cache file is named sha1(url).
RANK_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def package_ranks_dir() -> Path:
    """`ranks/` inside the tiktoken_inc package (found without importing it), else in the repo."""
    spec = importlib.util.find_spec("tiktoken_inc")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "ranks"
            if candidate.is_dir():
                return candidate
    return REPO_ROOT / "tiktoken_inc" / "ranks"


def rank_file(name: str) -> Path:
    """Path of a bundled rank file (r50k_base, p50k_base, cl100k_base, o200k_base)."""
    return package_ranks_dir() / f"{name}.tiktoken"


def reference_name(name: str) -> str:
    """The tiktoken encoding that serves as the reference for `name` (gpt2 -> r50k_base)."""
    return "r50k_base" if name == "gpt2" else name


def corpus_documents(text: str) -> list[str]:
    """A corpus file's text split into documents (its source files are separated by a blank line)."""
    return [doc for doc in text.split("\n\n") if doc]


def chunks_of(text: str, size: int) -> list[str]:
    """`text` cut into consecutive pieces of about `size` characters, each ending after a newline."""
    out = []
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def best_time(call, repeat: int = 3) -> float:
    """The best of `repeat` timings of call() in this thread's CPU time (for shape-of-
    complexity tests, which compare timings with each other, never with a number of
    seconds).  CPU time, not wall-clock time: the time the thread waits while other
    processes run is left out, and the calls timed do their work on the calling thread."""
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        call()
        best = min(best, time.thread_time() - start)
    return best


def decodable(enc, token: int) -> bool:
    """Whether `enc` (tiktoken's or ours) has bytes for `token`."""
    try:
        enc.decode_single_token_bytes(token)
        return True
    except KeyError:
        return False
