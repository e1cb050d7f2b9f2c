"""The on-disk cache of built tables, so a warm `get_encoding` maps a file instead of
building (o200k_base: about 45 ms, import included, instead of about 0.3 s).  Every table
of a mapped image is checked before it is used, but only the pages encoding touches stay
in the process's memory.

One file per (mergeable tokens, compiled core), named `<vocabulary key>-<core key>.tkivocab`
(both from sha256s: of the rank file, for a bundled encoding; of the ranks themselves, for
a custom one, `ranks_key`), so other tokens or a rebuilt C core never reuse a stale image,
and a custom `Encoding` (built, or unpickled in a worker) maps its tables as `get_encoding`
does.  An image holds no special tokens: they are
added once it is mapped, so encodings that differ only in them (o200k_base and
o200k_harmony, p50k_base and p50k_edit) share one image.  Files are written atomically
(a new temporary file, then a rename), so concurrent processes are safe and a mapped file
is never written in place; each image carries a checksum and is checked table by table,
and a damaged or crafted one is rebuilt and replaced.  After writing an image, the images
of the same vocabulary by other builds of the core are removed but for the newest
KEEP_OTHER_BUILDS (two installed versions in use side by side keep theirs), and so are
temporary files that an interrupted write left more than an hour ago.

Where (`cache_dir`): $TIKTOKEN_INC_CACHE_DIR (an empty string turns the cache off), else
$XDG_CACHE_HOME/tiktoken_inc, else ~/.cache/tiktoken_inc, else, where there is no home
directory or it cannot be written, `tiktoken_inc-<uid>` in the temporary directory.  A
directory is created with mode 0700, and used only if it belongs to the user and nobody
else can write to it (no group or other write permission, sticky or not): whoever can
create files in the cache could make every process that loads from it read their tables.
Otherwise the tables are built in memory in each process, and a warning (once per
directory) says why and what to do.  A cache file is opened without following a symbolic
link and without blocking (a FIFO there does not hang), and used only if it is a regular
file of the user's that nobody else can write; anything else in its place is rebuilt and
replaced.

```
>>> from tiktoken_inc._cache import cache_path
>>> cache_path("0" * 64).endswith(".tkivocab")
True
```
"""
from __future__ import annotations

import functools
import glob
import marshal
import mmap
import os
import stat
import threading
import time
import warnings
from typing import Callable, Optional

from tiktoken_inc._native import NativeVocab
from tiktoken_inc.load import sha256_hex


@functools.lru_cache(maxsize=1)
def _core_fingerprint() -> str:
    """sha256 of the compiled C core: tables built by another build are never reused."""
    from tiktoken_inc._native import CORE_LIBRARY_PATH

    with open(CORE_LIBRARY_PATH, "rb") as file:
        return sha256_hex(file.read())


def _uid() -> Optional[int]:
    """The user's id (None where there is none: Windows, whose ACLs are not checked)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def _unsafe(info: os.stat_result, kind: str) -> Optional[str]:
    """Why a directory or file with this stat may not be used by the cache, or None."""
    if kind == "directory" and not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    uid = _uid()
    if uid is not None and info.st_uid != uid:
        return f"it belongs to user id {info.st_uid}, not to this user ({uid})"
    if uid is not None and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others can write to it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(directory: str, reason: str) -> None:
    with _warned_lock:
        if (directory, reason) in _warned:
            return
        _warned.add((directory, reason))
    warnings.warn(
        f"tiktoken_inc does not use the table cache {directory!r}: {reason}. The tables are "
        "built in memory in each process instead (about 0.1-0.3 s each). Use a directory of "
        "your own that others cannot write to (chmod go-w, or set TIKTOKEN_INC_CACHE_DIR to "
        "another), or set TIKTOKEN_INC_CACHE_DIR='' to turn the cache off and silence this.",
        RuntimeWarning,
        stacklevel=4,
    )


def _prepare(directory: str) -> tuple[bool, Optional[str]]:
    """Creates `directory` if it is missing (mode 0700); returns (created or found, why it
    may not be used: None when it may)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
    except OSError as error:
        return False, f"it cannot be created ({error.strerror or error})"
    return True, _unsafe(info, "directory")


def _default_dirs() -> list[str]:
    """Where the cache goes when TIKTOKEN_INC_CACHE_DIR is not set, in order of preference."""
    candidates = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        candidates.append(os.path.join(xdg, "tiktoken_inc"))
    else:
        home = os.path.expanduser("~")
        if home != "~" and os.path.isdir(home):  # with HOME unset: the password database's
            candidates.append(os.path.join(home, ".cache", "tiktoken_inc"))
    import tempfile  # (here: importing it costs a warm start ~3 ms)

    uid = _uid()
    user = str(uid) if uid is not None else _user_name()
    candidates.append(os.path.join(tempfile.gettempdir(), f"tiktoken_inc-{user}"))
    return candidates


def _user_name() -> str:
    try:
        import getpass

        return getpass.getuser()
    except (ImportError, KeyError, OSError):
        return "user"


def cache_dir() -> Optional[str]:
    """The cache directory, created if missing and checked (see the module's docstring);
    None when caching is off or no directory may be used (a warning then says why)."""
    configured = os.environ.get("TIKTOKEN_INC_CACHE_DIR")
    if configured is not None:
        if not configured:
            return None
        directory = os.path.abspath(os.path.expanduser(configured))
        _, reason = _prepare(directory)
        if reason is not None:
            _warn_once(directory, reason)
            return None
        return directory
    candidates = _default_dirs()
    for directory in candidates:
        exists, reason = _prepare(directory)
        if not exists:
            continue  # no home, or one that cannot be written: the next place
        if reason is not None:
            _warn_once(directory, reason)
            return None
        return directory
    _warn_once(candidates[-1], "no cache directory can be created")
    return None


#: A custom vocabulary of fewer mergeable tokens is built in each process, not cached: it
#: builds in milliseconds, and caching each one (a test suite makes thousands) would only
#: fill the cache.
CACHED_TOKENS_AT_LEAST = 10_000


def ranks_key(mergeable_ranks: object) -> Optional[str]:
    """The cache key of a custom vocabulary's mergeable ranks (a dict of bytes -> int of
    CACHED_TOKENS_AT_LEAST tokens or more), or None: not cached.

    The sha256 of the dict's items in order, serialized by marshal (its version 2 writes no
    back-references, so the same items give the same bytes in every process): about 7 ms
    for o200k_base's 200,000 tokens, where a Python loop over them takes ten times that.
    Bytes and ints, and nothing else, serialize as they do, so an equal key means tokens
    and ranks that built before.  Another order of the same items is another key (another
    image), never a wrong one.

    ```
    >>> ranks_key({bytes([b]): b for b in range(256)}) is None  # too small to cache
    True
    ```
    """
    if type(mergeable_ranks) is not dict or len(mergeable_ranks) < CACHED_TOKENS_AT_LEAST:
        return None
    try:
        data = marshal.dumps(mergeable_ranks, 2)
    except ValueError:  # something marshal cannot write: the build says what is wrong
        return None
    return "ranks:" + sha256_hex(data)


def cache_path(vocabulary_key: str) -> Optional[str]:
    """Where the image of the mergeable tokens named by `vocabulary_key` (a hex digest: a
    rank file's sha256) lives; None when caching is off."""
    directory = cache_dir()
    if directory is None:
        return None
    name = sha256_hex(vocabulary_key.encode())[:32]
    return os.path.join(directory, f"{name}-{_core_fingerprint()[:16]}.tkivocab")


#: How a cache file is opened: never through a symbolic link, never waiting (on a FIFO).
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def _map(path: str) -> Optional[mmap.mmap]:
    """A read-only mapping of the image file at `path`, or None if it is missing or is not
    a regular file of the user's that nobody else can write (a link, a FIFO, a device...)."""
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or _unsafe(info, "file") is not None or info.st_size == 0:
            return None
        return mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)


def cached_vocab(
    vocabulary_key: str,
    special_tokens: dict[str, int],
    build: Callable[[], NativeVocab],
    empty_token_rank: Optional[int] = None,
) -> NativeVocab:
    """The tables of the mergeable tokens named by `vocabulary_key` from the cache, given
    `special_tokens` (and the rank of an empty mergeable token, if any: see
    NativeVocab.set_specials); else `build()` (which builds them with their special
    tokens), stored in the background."""
    path = cache_path(vocabulary_key)
    if path is not None:
        image = _map(path)
        vocab = NativeVocab.from_image(image) if image is not None else None
        if vocab is not None:
            vocab.set_specials(special_tokens, empty_token_rank)
            return vocab
    vocab = build()
    if path is not None:
        # Written off the caller's path, table by table (no copy of the image); a non-daemon
        # thread, so the process finishes the write before it exits (an interrupted write
        # leaves only a temporary file).
        threading.Thread(target=_store, args=(vocab, path), name="tiktoken_inc-cache").start()
    return vocab


#: Images of the same vocabulary by other builds of the core that a write leaves in place.
KEEP_OTHER_BUILDS = 2
#: A temporary file older than this (seconds) is what an interrupted write left behind.
STALE_TEMPORARY_SECONDS = 3600


def _store(vocab: NativeVocab, path: str) -> None:
    try:
        vocab.write_image(path)
    except OSError:
        return  # a read-only or full disk only costs the next process a rebuild
    _remove_stale(path)


def _remove_stale(path: str) -> None:
    """Removes, beside the image just written at `path`: the images of the same vocabulary
    by other core builds but the newest KEEP_OTHER_BUILDS, and old temporary files."""
    directory, name = os.path.split(path)
    vocabulary_key = name.split("-", 1)[0]
    try:
        others = [
            other for other in glob.glob(os.path.join(glob.escape(directory), f"{vocabulary_key}-*.tkivocab"))
            if other != path
        ]
        others.sort(key=os.path.getmtime, reverse=True)
        stale = others[KEEP_OTHER_BUILDS:]
        cutoff = time.time() - STALE_TEMPORARY_SECONDS
        for temporary in glob.glob(os.path.join(glob.escape(directory), ".tmp-*.tkivocab")):
            if os.path.getmtime(temporary) < cutoff:
                stale.append(temporary)
    except OSError:
        return
    for file in stale:
        try:
            os.remove(file)
        except OSError:
            pass  # gone already (another process), or not ours to remove
