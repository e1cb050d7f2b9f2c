"""tiktoken_inc: tiktoken's API and exact token ids, with an incremental BPE core in C.

```
>>> import tiktoken_inc as tiktoken
>>> enc = tiktoken.get_encoding("cl100k_base")
>>> enc.decode(enc.encode("hello world"))
'hello world'
```
"""
from tiktoken_inc._corebpe import TokenLimitError as TokenLimitError
from tiktoken_inc.core import Encoding as Encoding
from tiktoken_inc.model import encoding_for_model as encoding_for_model
from tiktoken_inc.model import encoding_name_for_model as encoding_name_for_model
from tiktoken_inc.open_models import load_tokenizer as load_tokenizer
from tiktoken_inc.patching import patch as patch
from tiktoken_inc.patching import unpatch as unpatch
from tiktoken_inc.registry import get_encoding as get_encoding
from tiktoken_inc.registry import list_encoding_names as list_encoding_names

__version__ = "0.1.0"

__all__ = [
    "Encoding",
    "TokenLimitError",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "load_tokenizer",
    "patch",
    "unpatch",
    "__version__",
]


def _patch_if_asked() -> None:
    """`patch()` when the environment asks for it (TIKTOKEN_INC_PATCH=1)."""
    import os

    from tiktoken_inc.patching import PATCH_VARIABLE

    if os.environ.get(PATCH_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        patch()


_patch_if_asked()
