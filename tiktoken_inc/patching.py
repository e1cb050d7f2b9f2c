"""Running code that imports tiktoken on tiktoken_inc's core.

Libraries (text splitters, token counters, LLM frameworks) call `tiktoken.get_encoding`,
`tiktoken.encoding_for_model` and `tiktoken.Encoding(...)` themselves.  After `patch()`, those
give tiktoken_inc encodings of a class that derives from both `tiktoken_inc.Encoding` and
`tiktoken.Encoding`: every method is tiktoken_inc's (same ids, same errors), and
`isinstance(enc, tiktoken.Encoding)` holds, also for a class imported before the patch.
`unpatch()` puts tiktoken's own functions back.  Setting the environment variable
`TIKTOKEN_INC_PATCH=1` patches when tiktoken_inc is first imported.

```
>>> import tiktoken, tiktoken_inc
>>> tiktoken_inc.patch()
>>> enc = tiktoken.get_encoding("cl100k_base")
>>> isinstance(enc, tiktoken.Encoding), isinstance(enc, tiktoken_inc.Encoding)
(True, True)
>>> tiktoken_inc.unpatch()
```
"""
from __future__ import annotations

import functools
import threading
from typing import Any

from tiktoken_inc.core import Encoding
from tiktoken_inc.model import encoding_name_for_model
from tiktoken_inc.registry import get_encoding as _get_encoding

#: The environment variable that makes `import tiktoken_inc` patch tiktoken.
PATCH_VARIABLE = "TIKTOKEN_INC_PATCH"

_lock = threading.Lock()
#: (module, attribute name, tiktoken's own value) for each attribute patched; empty when not.
_saved: list[tuple[Any, str, Any]] = []


@functools.lru_cache(maxsize=1)
def _tiktoken_class() -> type:
    """tiktoken_inc's Encoding that is also a `tiktoken.Encoding` (made on first use)."""
    import tiktoken

    class TiktokenEncoding(Encoding, tiktoken.Encoding):
        """A tiktoken_inc Encoding that code checking `isinstance(enc, tiktoken.Encoding)`
        accepts (made by `tiktoken.Encoding(...)` and `tiktoken.get_encoding` once patched)."""

    TiktokenEncoding.__module__ = "tiktoken_inc.patching"
    TiktokenEncoding.__qualname__ = "TiktokenEncoding"
    return TiktokenEncoding


def __getattr__(name: str) -> Any:
    if name == "TiktokenEncoding":  # (pickle finds the class here)
        return _tiktoken_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_registered: dict[str, Encoding] = {}


def get_encoding(encoding_name: str) -> Encoding:
    """`tiktoken.get_encoding` once patched: the registered tiktoken_inc encoding, as an
    instance of the class that is also a `tiktoken.Encoding` (sharing its tables)."""
    encoding = _registered.get(encoding_name)
    if encoding is None:
        base = _get_encoding(encoding_name)
        with _lock:
            encoding = _registered.get(encoding_name)
            if encoding is None:
                encoding = object.__new__(_tiktoken_class())
                encoding.__dict__ = base.__dict__  # one state for both: pickles by name too
                _registered[encoding_name] = encoding
    return encoding


def encoding_for_model(model_name: str) -> Encoding:
    """`tiktoken.encoding_for_model` once patched."""
    return get_encoding(encoding_name_for_model(model_name))


def is_patched() -> bool:
    """True between `patch()` and `unpatch()`."""
    return bool(_saved)


def patch() -> None:
    """Makes `tiktoken.get_encoding`, `tiktoken.encoding_for_model` and `tiktoken.Encoding(...)`
    give tiktoken_inc encodings that are also `tiktoken.Encoding` instances.  Idempotent;
    `unpatch()` undoes it.

    ```
    >>> tiktoken_inc.patch()
    >>> type(tiktoken.get_encoding("o200k_base")).__name__
    'TiktokenEncoding'
    ```
    """
    import tiktoken
    import tiktoken.core
    import tiktoken.model
    import tiktoken.registry

    with _lock:
        if _saved:
            return
        replacements = [
            (tiktoken, "get_encoding", get_encoding),
            (tiktoken.registry, "get_encoding", get_encoding),
            (tiktoken.model, "get_encoding", get_encoding),
            (tiktoken, "encoding_for_model", encoding_for_model),
            (tiktoken.model, "encoding_for_model", encoding_for_model),
            (tiktoken, "Encoding", _tiktoken_class()),
            (tiktoken.core, "Encoding", _tiktoken_class()),
            (tiktoken.registry, "Encoding", _tiktoken_class()),
        ]
        for module, name, value in replacements:
            _saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)


def unpatch() -> None:
    """Puts tiktoken's own functions and class back (encodings made meanwhile stay usable)."""
    with _lock:
        while _saved:
            module, name, value = _saved.pop()
            setattr(module, name, value)
