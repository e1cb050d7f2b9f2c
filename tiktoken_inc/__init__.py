"""tiktoken_inc: tiktoken's API and exact token ids, with an incremental BPE core in C.

```
>>> import tiktoken_inc as tiktoken
>>> enc = tiktoken.get_encoding("cl100k_base")
>>> enc.decode(enc.encode("hello world"))
'hello world'
```
"""
import importlib.machinery
import os
import sys


def _borrow_compiled_core() -> None:
    """From a source checkout without a build in place, use the installed compiled core.

    `python -m ...` run at the repository root imports this directory rather than the
    installed package; the C core (`_tki`) then comes from the installed copy.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    names = ["_tki" + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES]

    def has_core(directory: str) -> bool:
        return any(os.path.isfile(os.path.join(directory, name)) for name in names)

    if has_core(here):
        return
    for entry in sys.path:
        candidate = os.path.join(os.path.abspath(entry or os.curdir), "tiktoken_inc")
        if os.path.normcase(candidate) != os.path.normcase(here) and has_core(candidate):
            __path__.append(candidate)
            return


_borrow_compiled_core()

from tiktoken_inc.core import Encoding as Encoding  # noqa: E402
from tiktoken_inc.model import encoding_for_model as encoding_for_model  # noqa: E402
from tiktoken_inc.model import encoding_name_for_model as encoding_name_for_model  # noqa: E402
from tiktoken_inc.registry import get_encoding as get_encoding  # noqa: E402
from tiktoken_inc.registry import list_encoding_names as list_encoding_names  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Encoding",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "__version__",
]
