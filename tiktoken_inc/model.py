"""Which encoding a model uses, with tiktoken's own tables.

```
>>> encoding_name_for_model("gpt-4o")
'o200k_base'
>>> encoding_for_model("gpt-3.5-turbo-0613")
<Encoding 'cl100k_base'>
```
"""
from __future__ import annotations

from typing import Any

from tiktoken_inc.core import Encoding
from tiktoken_inc.registry import get_encoding

__all__ = ["MODEL_PREFIX_TO_ENCODING", "MODEL_TO_ENCODING", "encoding_for_model", "encoding_name_for_model"]


def __getattr__(name: str) -> Any:
    """MODEL_TO_ENCODING and MODEL_PREFIX_TO_ENCODING: tiktoken's tables, imported on first use
    (importing tiktoken costs every `import tiktoken_inc` a few milliseconds otherwise)."""
    if name in ("MODEL_TO_ENCODING", "MODEL_PREFIX_TO_ENCODING"):
        import tiktoken.model

        return getattr(tiktoken.model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding a model uses: an exact name first, then a known prefix.

    Raises KeyError (tiktoken's message) if the model is not recognised.

    ```
    >>> encoding_name_for_model("gpt-4-0314")
    'cl100k_base'
    ```
    """
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING

    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]

    # Prefixes cover dated and fine-tuned variants (and, like tiktoken, invented names).
    for model_prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(model_prefix):
            return encoding_name

    raise KeyError(
        f"Could not automatically map {model_name} to a tokeniser. "
        "Please use `tiktoken.get_encoding` to explicitly get the tokeniser you expect."
    ) from None


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding a model uses (KeyError if the model is not recognised).

    ```
    >>> encoding_for_model("gpt2").name
    'gpt2'
    ```
    """
    return get_encoding(encoding_name_for_model(model_name))
