"""The encodings: bundled ones (read from `ranks/`, offline) and tiktoken's plugins.

```
>>> import tiktoken_inc
>>> tiktoken_inc.get_encoding("cl100k_base")
<Encoding 'cl100k_base'>
>>> tiktoken_inc.list_encoding_names()[:3]
['gpt2', 'r50k_base', 'p50k_base']
```
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from tiktoken_inc._cache import cached_vocab
from tiktoken_inc._corebpe import _one_text_per_rank
from tiktoken_inc._native import PATTERN_CL100K, PATTERN_O200K, PATTERN_R50K, NativeVocab, register_pattern
from tiktoken_inc.core import Encoding
from tiktoken_inc.load import load_tiktoken_bpe, read_rank_file, vocab_from_rank_file

_RANKS_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "ranks")

#: sha256 of each bundled rank file (the `expected_hash` of tiktoken_ext.openai_public).
RANK_FILE_SHA256: dict[str, str] = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# The split patterns, as data (tiktoken_ext/openai_public.py).
R50K_PAT_STR = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# tiktoken's own patterns are split in C (the same pieces, without the `regex` package).
register_pattern(R50K_PAT_STR, PATTERN_R50K)
register_pattern(CL100K_PAT_STR, PATTERN_CL100K)
register_pattern(O200K_PAT_STR, PATTERN_O200K)


class BundledRanks(Mapping[bytes, int]):
    """The mergeable ranks of a bundled rank file, read (and sha256-checked) on first use.

    `get_encoding` usually needs only the C tables, which come from the on-disk cache
    (`_cache.py`); the Python dict is built only when something asks for it (pickling a
    custom Encoding, `encode_with_unstable`, or indexing this mapping).

    ```
    >>> bundled_ranks("r50k_base")[b"hello"]
    31373
    ```
    """

    def __init__(self, stem: str):
        self.stem = stem
        self.sha256 = RANK_FILE_SHA256[stem]
        self.path = os.path.join(_RANKS_DIR, f"{stem}.tiktoken")
        self._ranks: dict[bytes, int] | None = None
        self._lock = threading.Lock()

    def load(self) -> dict[bytes, int]:
        """The ranks as a dict (read once)."""
        if self._ranks is None:
            with self._lock:
                if self._ranks is None:
                    self._ranks = load_tiktoken_bpe(self.path, expected_hash=self.sha256)
        return self._ranks

    def build_vocab(self, special_tokens: dict[str, int]) -> NativeVocab:
        """The C tables for these ranks and special tokens, read from the file in C (no
        Python object per token); what `Encoding.build_vocab(self.load(), ...)` gives."""
        data = read_rank_file(self.path, expected_hash=self.sha256)
        return vocab_from_rank_file(data, _one_text_per_rank(special_tokens), self.path)

    def __getitem__(self, token: bytes) -> int:
        return self.load()[token]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def __reduce__(self) -> tuple[Any, ...]:
        return (bundled_ranks, (self.stem,))


def bundled_ranks(stem: str) -> BundledRanks:
    """The mergeable ranks of a bundled rank file (a mapping, loaded on first use)."""
    return BundledRanks(stem)


def gpt2() -> dict[str, Any]:
    """gpt2: the ranks and special token of r50k_base (tiktoken downloads it; we do not)."""
    return {**r50k_base(), "name": "gpt2"}


def r50k_base() -> dict[str, Any]:
    """r50k_base: GPT-3 era models (davinci, curie, ...)."""
    return {
        "name": "r50k_base",
        "explicit_n_vocab": 50257,
        "pat_str": R50K_PAT_STR,
        "mergeable_ranks": bundled_ranks("r50k_base"),
        "special_tokens": {ENDOFTEXT: 50256},
    }


def p50k_base() -> dict[str, Any]:
    """p50k_base: text-davinci-002/003 and the code models."""
    return {
        "name": "p50k_base",
        "explicit_n_vocab": 50281,
        "pat_str": R50K_PAT_STR,
        "mergeable_ranks": bundled_ranks("p50k_base"),
        "special_tokens": {ENDOFTEXT: 50256},
    }


def p50k_edit() -> dict[str, Any]:
    """p50k_edit: p50k_base with the fill-in-the-middle special tokens."""
    return {
        "name": "p50k_edit",
        "pat_str": R50K_PAT_STR,
        "mergeable_ranks": bundled_ranks("p50k_base"),
        "special_tokens": {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283},
    }


def cl100k_base() -> dict[str, Any]:
    """cl100k_base: gpt-4, gpt-3.5-turbo and the text-embedding models."""
    return {
        "name": "cl100k_base",
        "pat_str": CL100K_PAT_STR,
        "mergeable_ranks": bundled_ranks("cl100k_base"),
        "special_tokens": {
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    }


def o200k_base() -> dict[str, Any]:
    """o200k_base: gpt-4o, gpt-4.1, gpt-5 and the o-series models."""
    return {
        "name": "o200k_base",
        "pat_str": O200K_PAT_STR,
        "mergeable_ranks": bundled_ranks("o200k_base"),
        "special_tokens": {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    }


def o200k_harmony() -> dict[str, Any]:
    """o200k_harmony: o200k_base's ranks with the harmony chat-format special tokens."""
    base = o200k_base()
    special_tokens = {
        **base["special_tokens"],
        "<|startoftext|>": 199998,
        "<|endoftext|>": 199999,
        "<|reserved_200000|>": 200000,
        "<|reserved_200001|>": 200001,
        "<|return|>": 200002,
        "<|constrain|>": 200003,
        "<|reserved_200004|>": 200004,
        "<|channel|>": 200005,
        "<|start|>": 200006,
        "<|end|>": 200007,
        "<|message|>": 200008,
        "<|reserved_200009|>": 200009,
        "<|reserved_200010|>": 200010,
        "<|reserved_200011|>": 200011,
        "<|call|>": 200012,
    }
    special_tokens.update({f"<|reserved_{i}|>": i for i in range(200013, 201088)})
    return {**base, "name": "o200k_harmony", "special_tokens": special_tokens}


#: The bundled encodings, in tiktoken's order: name -> constructor of Encoding's arguments.
ENCODING_CONSTRUCTORS: dict[str, Callable[[], dict[str, Any]]] = {
    "gpt2": gpt2,
    "r50k_base": r50k_base,
    "p50k_base": p50k_base,
    "p50k_edit": p50k_edit,
    "cl100k_base": cl100k_base,
    "o200k_base": o200k_base,
    "o200k_harmony": o200k_harmony,
}

_lock = threading.RLock()
#: Encodings built so far, by name (registered encodings pickle by name).
ENCODINGS: dict[str, Encoding] = {}
#: The same encodings without pre-splitting (`get_encoding(name, pretokenize=False)`), by
#: name; each shares the C tables of its ENCODINGS twin.
NO_PRETOKENIZE_ENCODINGS: dict[str, Encoding] = {}


def _plugin_constructors() -> dict[str, Callable[[], dict[str, Any]]]:
    """tiktoken's plugin constructors (tiktoken_ext.*): they return Encoding's arguments.

    Only the constructors are used; tiktoken's own CoreBPE is never built.
    """
    import tiktoken.registry

    tiktoken.registry.list_encoding_names()  # imports the plugins once, thread-safely
    return dict(tiktoken.registry.ENCODING_CONSTRUCTORS or {})


def _plugin_modules() -> list[str]:
    """The names of tiktoken's plugin modules, for error messages."""
    import tiktoken.registry

    finder = getattr(tiktoken.registry, "_available_plugin_modules", None)
    return list(finder()) if finder is not None else []


def get_encoding(encoding_name: str, *, pretokenize: bool = True) -> Encoding:
    """The encoding called `encoding_name`, built once and then shared (thread-safe).

    Bundled names load offline; other names come from tiktoken's plugins (tiktoken_ext),
    whose constructors may download their files. Raises ValueError for unknown names.

    With `pretokenize=False`, the same vocabulary without the regex pre-split: the text
    between special tokens is one BPE piece (tiktoken's `_encode_single_piece` on each
    stretch).  It is cached separately, shares the C tables, and its repr says
    `pretokenize=False`.

    ```
    >>> get_encoding("o200k_base").encode("hello world")
    [24912, 2375]
    >>> get_encoding("cl100k_base", pretokenize=False).encode("hello world")
    [15339, 1917]
    ```
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    if pretokenize is not True:
        if pretokenize is not False:
            raise TypeError(f"pretokenize must be True or False, not {pretokenize!r}")
        return _get_without_pretokenize(encoding_name)

    encoding = ENCODINGS.get(encoding_name)
    if encoding is not None:
        return encoding

    with _lock:
        encoding = ENCODINGS.get(encoding_name)
        if encoding is not None:
            return encoding

        constructor = ENCODING_CONSTRUCTORS.get(encoding_name)
        if constructor is None:
            constructor = _plugin_constructors().get(encoding_name)
        if constructor is None:
            import tiktoken

            raise ValueError(
                f"Unknown encoding {encoding_name}.\n"
                f"Bundled encodings: {list(ENCODING_CONSTRUCTORS)}\n"
                f"Plugins found: {_plugin_modules()}\n"
                f"tiktoken version: {tiktoken.__version__} (are you on latest?)"
            )
        encoding = _construct(constructor())
        encoding._by_name = (get_encoding, (encoding_name,))  # pickled by name
        ENCODINGS[encoding_name] = encoding
        return encoding


def _get_without_pretokenize(encoding_name: str) -> Encoding:
    """get_encoding(encoding_name, pretokenize=False): the registered encoding's twin."""
    encoding = NO_PRETOKENIZE_ENCODINGS.get(encoding_name)
    if encoding is not None:
        return encoding
    base = get_encoding(encoding_name)
    with _lock:
        encoding = NO_PRETOKENIZE_ENCODINGS.get(encoding_name)
        if encoding is None:
            encoding = Encoding.from_vocab(
                base.name, pat_str=base._pat_str, mergeable_ranks=base._given_ranks,
                special_tokens=base._special_tokens, vocab=base._core_bpe._vocab, pretokenize=False,
            )
            encoding.max_token_value = base.max_token_value
            encoding._by_name = (_get_without_pretokenize, (encoding_name,))  # pickled by name
            NO_PRETOKENIZE_ENCODINGS[encoding_name] = encoding
        return encoding


def _construct(arguments: dict[str, Any]) -> Encoding:
    """Encoding(**arguments); for a bundled rank file, with the C tables from the cache."""
    ranks = arguments["mergeable_ranks"]
    if not isinstance(ranks, BundledRanks):
        return Encoding(**arguments)
    special_tokens = arguments["special_tokens"]
    vocab = cached_vocab(
        ranks.sha256, _one_text_per_rank(special_tokens), lambda: ranks.build_vocab(special_tokens)
    )
    return Encoding.from_vocab(
        arguments["name"], pat_str=arguments["pat_str"], mergeable_ranks=ranks,
        special_tokens=special_tokens, vocab=vocab,
    )


def list_encoding_names() -> list[str]:
    """The names `get_encoding` accepts, in tiktoken's order (its plugins' names, module by
    module), and any bundled name no plugin gives after them.

    ```
    >>> list_encoding_names()
    ['gpt2', 'r50k_base', 'p50k_base', 'p50k_edit', 'cl100k_base', 'o200k_base', 'o200k_harmony']
    ```
    """
    with _lock:
        names = list(_plugin_constructors())
        names += [name for name in ENCODING_CONSTRUCTORS if name not in names]
        return names
