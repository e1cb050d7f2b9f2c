"""The on-disk cache of built tables, so a warm `get_encoding` maps a file instead of
building (o200k_base: about 15 ms instead of about 0.17 s).  The mapped image is checked
whole, but only the pages encoding touches stay in the process's memory.

One file per (rank file sha256, special tokens, compiled core): the name is a sha256 of
all three, so a new rank file, other special tokens or a rebuilt C core never reuse a stale
image.  Files are written atomically (temporary file + rename), so concurrent processes are
safe; each image carries a checksum, and a damaged one is rebuilt and replaced.

Where: $TIKTOKEN_INC_CACHE_DIR, else $XDG_CACHE_HOME/tiktoken_inc, else
~/.cache/tiktoken_inc.  Set TIKTOKEN_INC_CACHE_DIR to an empty string to turn it off.

```
>>> from tiktoken_inc._cache import cache_path
>>> cache_path("0" * 64, {"<|endoftext|>": 100257}).endswith(".tkivocab")
True
```
"""
from __future__ import annotations

import functools
import hashlib
import os
import threading
from typing import Callable, Optional

from tiktoken_inc._native import NativeVocab


@functools.lru_cache(maxsize=1)
def _core_fingerprint() -> str:
    """sha256 of the compiled C core: tables built by another build are never reused."""
    from tiktoken_inc import _tki

    with open(_tki.__file__, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def cache_dir() -> Optional[str]:
    """The cache directory, or None when caching is turned off."""
    configured = os.environ.get("TIKTOKEN_INC_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tiktoken_inc")


def cache_path(rank_file_sha256: str, special_tokens: dict[str, int]) -> Optional[str]:
    """Where the image for these ranks and special tokens lives (None: caching is off)."""
    directory = cache_dir()
    if directory is None:
        return None
    key = hashlib.sha256()
    key.update(rank_file_sha256.encode())
    for text, rank in sorted(special_tokens.items()):
        key.update(f"\0{text}\0{rank}".encode("utf-8", "surrogatepass"))
    key.update(_core_fingerprint().encode())
    return os.path.join(directory, key.hexdigest()[:32] + ".tkivocab")


def cached_vocab(
    rank_file_sha256: str, special_tokens: dict[str, int], build: Callable[[], NativeVocab]
) -> NativeVocab:
    """The tables from the cache, or built by `build()` and then stored in the background."""
    path = cache_path(rank_file_sha256, special_tokens)
    if path is not None:
        vocab = NativeVocab.from_image(path)
        if vocab is not None:
            return vocab
    vocab = build()
    if path is not None:
        # Written off the caller's path, table by table (no copy of the image); a non-daemon
        # thread, so the process finishes the write before it exits (an interrupted write
        # leaves only a temporary file).
        threading.Thread(target=_store, args=(vocab, path), name="tiktoken_inc-cache").start()
    return vocab


def _store(vocab: NativeVocab, path: str) -> None:
    try:
        vocab.write_image(path)
    except OSError:
        pass  # a read-only or full disk only costs the next process a rebuild
