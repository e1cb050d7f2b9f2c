"""`Encoding`: tiktoken's Encoding, with the BPE of every piece done by the C core.

```
>>> import tiktoken_inc as tiktoken
>>> enc = tiktoken.get_encoding("gpt2")
>>> enc.encode("hello world")
[31373, 995]
>>> enc.decode([31373, 995])
'hello world'
```
"""
from __future__ import annotations

import functools
import itertools
import os
from typing import (
    TYPE_CHECKING, AbstractSet, Any, Callable, Collection, Iterable, Literal, Mapping, NamedTuple, NoReturn, Sequence,
)

from tiktoken_inc._corebpe import (
    CoreBPE,
    _require_set,
    TokenLimitError,
    check_limit,
    first_special_in,
    raise_disallowed_special_token,
    special_token_regex,
)
from tiktoken_inc._native import NativeVocab, held_method, utf8_replacing_surrogates
# Imported with the package, not on first use: a signal handler that makes a stream or a
# prefix index while the interrupted code is importing the module would find it half made
# (ImportError).  The two cost about 6 ms of import time.
from tiktoken_inc.prefix import PrefixIndex, heal, prefix_index
from tiktoken_inc.streaming import StreamDecoder, StreamEncoder

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import numpy.typing as npt


def _thread_pool(num_threads: int) -> "ThreadPoolExecutor":
    """A ThreadPoolExecutor (concurrent.futures is imported on first use: a slow import)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(num_threads)


def _map_in_chunks(function, items: Sequence, num_threads: int) -> list:
    """[function(item) for item in items] on a pool of `num_threads`, the items handed out in
    consecutive slices (a task per item would cost more than a short item's work)."""
    items = list(items)
    size = max(1, min(256, len(items) // (4 * max(1, num_threads)) or 1))
    slices = [items[start:start + size] for start in range(0, len(items), size)]
    with _thread_pool(num_threads) as executor:
        parts = executor.map(lambda part: [function(item) for item in part], slices)
        return [result for part in parts for result in part]


def _usable_threads(num_threads: int) -> int:
    """num_threads, but no more than the CPUs this process may run on (threads beyond those
    only take turns); ValueError below 1, as tiktoken's ThreadPoolExecutor raises."""
    if num_threads < 1:
        raise ValueError("max_workers must be greater than 0")  # tiktoken's pool's words
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on this platform
        cpus = os.cpu_count() or 1
    return min(num_threads, max(1, cpus))


class Encoding:
    """A tokenizer: a regex pre-split pattern, mergeable tokens and special tokens.

    Every method gives what `tiktoken.Encoding` gives for the same arguments, exceptions
    included.  Unlike tiktoken, a vocabulary must give every single byte a rank, and a
    special token may not reuse a mergeable token's id (both raise ValueError when built).

    ```
    >>> enc = Encoding("toy", pat_str=r"\\S+|\\s+",
    ...                mergeable_ranks={bytes([b]): b for b in range(256)} | {b"ab": 256},
    ...                special_tokens={"<|endoftext|>": 257})
    >>> enc.encode("abab")
    [256, 256]
    ```
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str | None,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
        pretokenize: bool | None = None,
    ):
        """Creates an Encoding.

        Args:
            name: the encoding's name; encodings with different tokens should have different
                names (registered encodings pickle by name).
            pat_str: the regex (for the `regex` package) that splits text into pieces, or
                None for an encoding without pre-splitting (then pretokenize is False).
            mergeable_ranks: token bytes -> rank; ranks are ids and merge priorities. Every
                single byte needs a rank.
            special_tokens: special token text -> id.
            explicit_n_vocab: if given, the number of tokens (mergeable plus special), checked
                together with max_token_value == explicit_n_vocab - 1.
            pretokenize: False encodes the text between special tokens as one piece, with no
                regex split (tiktoken's `_encode_single_piece` on each stretch); the pattern
                is then kept but not used.  Default: True when there is a pattern.

        Raises ValueError when the pattern does not compile or the C core rejects the
        vocabulary (a missing single byte, duplicate ranks, a token longer than 4096 bytes),
        and AssertionError (as tiktoken) when explicit_n_vocab does not match.
        """
        self.name = name

        self._pat_str = pat_str
        self._pretokenize = _resolve_pretokenize(pat_str, pretokenize)
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = special_tokens

        if not mergeable_ranks:
            raise ValueError(
                f"encoding {name!r}: mergeable_ranks is empty; an encoding needs a rank for "
                "each of the 256 single bytes at least"
            )
        self.max_token_value = max(
            max(mergeable_ranks.values()), max(special_tokens.values(), default=0)
        )
        if explicit_n_vocab:
            n_tokens = len(mergeable_ranks) + len(special_tokens)
            if n_tokens != explicit_n_vocab or self.max_token_value != explicit_n_vocab - 1:
                raise AssertionError(
                    f"encoding {name!r}: explicit_n_vocab is {explicit_n_vocab}, but there are "
                    f"{n_tokens} tokens and the largest id is {self.max_token_value}; "
                    "pass the right explicit_n_vocab or None"
                )

        self._special_token_values = set(special_tokens.values())
        self._core_bpe = CoreBPE(mergeable_ranks, special_tokens, pat_str if self._pretokenize else None)
        self._bind_encode_ordinary()

    @staticmethod
    def build_vocab(mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int]) -> NativeVocab:
        """The C tables for these tokens (what `Encoding(...)` builds), for caching them."""
        return CoreBPE.build_vocab(mergeable_ranks, special_tokens)

    @classmethod
    def from_vocab(
        cls,
        name: str,
        *,
        pat_str: str | None,
        mergeable_ranks: Mapping[bytes, int],
        special_tokens: dict[str, int],
        vocab: NativeVocab,
        pretokenize: bool | None = None,
    ) -> Encoding:
        """An Encoding over C tables built earlier (e.g. read from the on-disk cache, or
        shared with the same vocabulary's encoding with the other `pretokenize`).

        `vocab` must have been built from exactly these `mergeable_ranks` and
        `special_tokens`; the ranks mapping may load lazily: it is not read here.
        """
        self = cls.__new__(cls)
        self.name = name
        self._pat_str = pat_str
        self._pretokenize = _resolve_pretokenize(pat_str, pretokenize)
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = special_tokens
        self.max_token_value = vocab.info["max_rank"]
        self._special_token_values = set(special_tokens.values())
        self._core_bpe = CoreBPE(
            mergeable_ranks, special_tokens, pat_str if self._pretokenize else None, vocab=vocab
        )
        self._bind_encode_ordinary()
        return self

    def _bind_encode_ordinary(self) -> None:
        """Sets `self._ordinary_encoder`, what `encode_ordinary` calls: the C function itself
        when C splits (a str goes to C; anything else to `_encode_ordinary`: lone surrogates
        replaced, tiktoken's error for a non-str), else `_encode_ordinary` bound to the
        CoreBPE (not to the Encoding: the function then makes no cycle)."""
        fallback = functools.partial(_encode_ordinary, self._core_bpe)
        self._ordinary_encoder = self._core_bpe.ordinary_encoder(fallback) or fallback

    @property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        """The mergeable ranks as given; a dict, as in tiktoken, for a bundled encoding too
        (whose tables come from the cache: its rank file is read here, on first use)."""
        ranks = self._given_ranks
        load = getattr(ranks, "load", None)  # registry.BundledRanks, read lazily
        if not isinstance(ranks, dict) and callable(load):
            ranks = self._given_ranks = load()
        return ranks

    @_mergeable_ranks.setter
    def _mergeable_ranks(self, ranks: Mapping[bytes, int]) -> None:
        self._given_ranks = ranks

    def __repr__(self) -> str:
        if not self._pretokenize:
            return f"<Encoding {self.name!r} pretokenize=False>"
        return f"<Encoding {self.name!r}>"

    @property
    def pretokenize(self) -> bool:
        """True when text is split by the regex before BPE (tiktoken's behaviour).

        False for an encoding from `get_encoding(name, pretokenize=False)`: the text between
        special tokens is then one BPE piece -- tiktoken's `_encode_single_piece` of each
        stretch -- still in O(n log² t).

        ```
        >>> one_piece = tiktoken_inc.get_encoding("cl100k_base", pretokenize=False)
        >>> one_piece, one_piece.pretokenize, one_piece.encode("hello world")
        (<Encoding 'cl100k_base' pretokenize=False>, False, [15339, 1917])
        ```
        """
        return self._pretokenize

    @property
    def pretokenizer(self) -> str:
        """What splits text before BPE: "builtin:r50k", "builtin:cl100k" or "builtin:o200k"
        (tiktoken's own patterns, in C), "compiled" (another pattern, compiled for C),
        "regex" (a pattern outside what the compiler takes, split by the `regex` package;
        `pretokenizer_reason` says why), or "none" (no pre-split).

        ```
        >>> tiktoken_inc.get_encoding("cl100k_base").pretokenizer
        'builtin:cl100k'
        ```
        """
        return self._core_bpe.pretokenizer

    @property
    def pretokenizer_reason(self) -> str | None:
        """Why this encoding's pattern is split by the `regex` package (None when it is not)."""
        return self._core_bpe.pretokenizer_reason

    # ====================
    # Encoding
    # ====================

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes a string into tokens, ignoring special tokens.

        This is equivalent to `encode(text, disallowed_special=())` (but slightly faster).

        ```
        >>> enc.encode_ordinary("hello world")
        [31373, 995]
        ```
        """
        return self._ordinary_encoder(text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        max_tokens: int | None = None,
    ) -> list[int]:
        """Encodes a string into tokens.

        Special tokens unlock model capabilities, so text that looks like one raises by
        default.  `allowed_special` lists the special tokens to encode as such ("all" for
        every one); `disallowed_special` lists those whose text raises ValueError ("all":
        every special token not allowed; `()` encodes their text as ordinary text).

        With `max_tokens`, raises `TokenLimitError` (a ValueError carrying `.limit`) as soon
        as more than `max_tokens` ids are certain, having read the text only that far.

        ```
        >>> enc.encode("hello world")
        [31373, 995]
        >>> enc.encode("<|endoftext|>", allowed_special={"<|endoftext|>"})
        [50256]
        >>> enc.encode("<|endoftext|>", allowed_special="all")
        [50256]
        >>> enc.encode("<|endoftext|>")
        # Raises ValueError
        >>> enc.encode("<|endoftext|>", disallowed_special=())
        [27, 91, 437, 1659, 5239, 91, 29]
        ```
        """
        if max_tokens is not None:
            cap = check_limit(max_tokens, "max_tokens")
            allowed, refused = self._special_sets(allowed_special, disallowed_special)
            ids, _, exceeded = self._core_bpe.bounded(text, cap, allowed, refused, want_ids=True)
            if exceeded:
                raise TokenLimitError(max_tokens)
            return ids
        if (
            not allowed_special
            and disallowed_special == "all"
            and isinstance(allowed_special, (set, frozenset))  # None, (): tiktoken's TypeError below
            and self._encode_default is not None
        ):
            # The default call: one C call checks for special-token text and encodes.
            if len(self._special_texts()) == len(self._all_special):  # the set is unchanged
                ids = self._encode_default(text)
                if ids is not None:  # None: special-token text or surrogates, said below
                    return ids
        allowed_special = self._check_special(text, allowed_special, disallowed_special)
        try:
            return self._core_bpe.encode(text, allowed_special)
        except UnicodeEncodeError:
            # The text holds surrogates: like tiktoken, pair them up through UTF-16 and
            # replace the lone ones with U+FFFD.
            return self._core_bpe.encode(_replace_surrogates(text), allowed_special)

    def count_tokens(
        self,
        text: str,
        *,
        limit: int | None = None,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> int | None:
        """The number of tokens `encode` would return, without building the list.

        With `limit`, returns None as soon as more than `limit` tokens are certain: the work
        is the text up to that point plus the unresolved window (a few hundred bytes), not
        the whole text.  Special tokens are handled as in `encode` (a disallowed special
        raises ValueError when the scan reaches it).

        ```
        >>> enc.count_tokens("hello world")
        2
        >>> enc.count_tokens("a" * 10**9, limit=1000) is None  # milliseconds
        True
        ```
        """
        if (
            not allowed_special
            and disallowed_special == "all"
            and isinstance(allowed_special, (set, frozenset))  # None, (): tiktoken's TypeError below
            and self._count_default is not None
            and len(self._special_texts()) == len(self._all_special)  # the set is unchanged
        ):
            # The default call: one C call checks for special-token text and counts.
            count = self._count_default(text, limit)
            if count is not None:  # None: special-token text, surrogates, no str: said below
                return None if limit is not None and count > limit else count
        if not isinstance(text, str):
            raise TypeError(f"count_tokens expects a str, got {type(text).__name__}")
        cap = check_limit(limit, "limit")
        allowed, refused = self._special_sets(allowed_special, disallowed_special)
        _, count, exceeded = self._core_bpe.bounded(text, cap, allowed, refused, want_ids=False)
        return None if exceeded else count

    def truncate(
        self,
        text: str,
        max_tokens: int,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], str]:
        """The longest prefix of `text` that fits in `max_tokens` tokens: (its tokens, the prefix).

        The prefix ends on a character boundary, its tokens are a prefix of `encode(text)`,
        and encoding the prefix gives exactly those tokens.  Reads the text only up to where
        max_tokens + 1 tokens are certain.

        ```
        >>> enc.truncate("hello world, and more", 2)
        ([15339, 1917], 'hello world')
        ```
        """
        if not isinstance(text, str):
            raise TypeError(f"truncate expects a str, got {type(text).__name__}")
        cap = check_limit(max_tokens, "max_tokens")
        if cap is None:
            raise ValueError("max_tokens must be a non-negative integer, got None")
        allowed, refused = self._special_sets(allowed_special, disallowed_special)
        return self._core_bpe.truncate(text, cap, allowed, refused)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> npt.NDArray[np.uint32]:
        """Encodes a string into a read-only numpy array of uint32 tokens.

        The C core writes the ids straight into the array's memory (no Python list).

        ```
        >>> enc.encode_to_numpy("hello world")
        array([31373,   995], dtype=uint32)
        ```
        """
        allowed_special = self._check_special(text, allowed_special, disallowed_special)

        import numpy as np

        buffer = self._core_bpe.encode_to_tiktoken_buffer(text, allowed_special)
        ids = np.frombuffer(buffer, dtype=np.uint32)
        ids.flags.writeable = False  # as tiktoken's, made from bytes
        return ids

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel, ignoring special tokens.

        The threads (num_threads, but no more than the CPUs this process may run on) take
        small runs of the texts in turn, without the GIL; this thread builds the lists.

        ```
        >>> enc.encode_ordinary_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        ```
        """
        encode_many = self._core_bpe._encode_many
        if encode_many is None or not isinstance(text, Sequence):
            return _map_in_chunks(self.encode_ordinary, text, num_threads)
        threads = _usable_threads(num_threads)
        try:
            return encode_many(text, threads)  # one C call, which runs the threads
        except (TypeError, UnicodeEncodeError):  # a non-str, or surrogates: item by item,
            return _map_in_chunks(self.encode_ordinary, text, threads)  # as encode_ordinary says

    def encode_batch(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel (see `encode` for the options).

        ```
        >>> enc.encode_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        ```
        """
        allowed_special, disallowed_special = self._batch_special_sets(allowed_special, disallowed_special)
        encoder = functools.partial(
            self.encode, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        encode_many = self._special_batch_encoder(allowed_special, disallowed_special)
        if encode_many is not None and isinstance(text, Sequence):
            results = encode_many(text, _usable_threads(num_threads))  # one C call, as above
            return [ids if ids is not None else encoder(item) for ids, item in zip(results, text)]
        return _map_in_chunks(encoder, text, num_threads)

    def encode_ordinary_batch_to_numpy(
        self, text: Sequence[str], *, num_threads: int = 8
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """Encodes a list of strings, ignoring special tokens, into one flat array of ids.

        Returns `(ids, offsets)`: `ids` a uint32 array of the ids of all texts one after
        another, `offsets` an int64 array of `len(text) + 1`, text i's ids being
        `ids[offsets[i]:offsets[i + 1]]`, equal to `encode_ordinary(text[i])`.  No Python
        int is made: the threads (num_threads, at most the CPUs this process may run on)
        encode without the GIL and copy the ids straight into the array.  Needs numpy
        (`pip install 'tiktoken_inc[numpy]'`).

        ```
        >>> ids, offsets = enc.encode_ordinary_batch_to_numpy(["hello world", "goodbye world"])
        >>> ids, offsets
        (array([31373,   995, 11274, 16390,   995], dtype=uint32), array([0, 2, 5]))
        >>> ids[offsets[1]:offsets[2]].tolist() == enc.encode_ordinary("goodbye world")
        True
        ```
        """
        return self.encode_batch_to_numpy(
            text, num_threads=num_threads, allowed_special=frozenset(), disallowed_special=()
        )

    def encode_batch_to_numpy(
        self,
        text: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """Encodes a list of strings into one flat array of ids (see `encode` for the options,
        and `encode_ordinary_batch_to_numpy` for the result): text i's ids,
        `ids[offsets[i]:offsets[i + 1]]`, equal `encode(text[i], ...)` with the same
        arguments, and a disallowed special token raises encode's ValueError.

        ```
        >>> ids, offsets = enc.encode_batch_to_numpy(["hi<|endoftext|>", "x"], allowed_special="all")
        >>> ids.tolist(), offsets.tolist()
        ([5303, 50256, 87], [0, 2, 3])
        ```
        """
        np = _numpy("encode_batch_to_numpy")
        ids, offsets = self._encode_flat(
            text, num_threads=num_threads, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(offsets, dtype=np.int64)

    def _encode_flat(
        self,
        texts: Iterable[str | bytes],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        lines: bool = False,
        eot: int | None = None,
        id_bytes: int = 4,
        accept_bytes: bool = False,
        first_offset: int = 0,
    ) -> tuple[Any, Any]:
        """The flat batch without numpy: `(ids, offsets)` as buffers (bytearrays from C) of
        native uint32 ids (uint16 with `id_bytes=2`) and int64 offsets (from `first_offset`,
        for a part of a larger array: document i's ids are then
        `ids[offsets[i] - first_offset:offsets[i + 1] - first_offset]`).  Beyond
        `encode_batch_to_numpy`: with `lines` every line of a text ('\n' left out) is a
        document; `eot` is appended to every document's ids; with `accept_bytes` a text may be
        UTF-8 bytes, and bytes that are not raise `NotUTF8Error` (the corpus command's input).

        ```
        >>> ids, offsets = enc._encode_flat([b"hi\nx\n"], lines=True, eot=50256, accept_bytes=True)
        >>> memoryview(ids).cast("I").tolist(), memoryview(offsets).cast("q").tolist()
        ([5303, 50256, 87, 50256], [0, 2, 4])
        ```
        """
        threads = _usable_threads(num_threads)
        allowed_special, disallowed_special = self._batch_special_sets(allowed_special, disallowed_special)
        if not isinstance(texts, Sequence):
            texts = list(texts)
        encoder = functools.partial(
            self.encode, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        encode_flat = self._special_batch_encoder(allowed_special, disallowed_special, flat=True)
        if encode_flat is None:  # a custom pattern, or special-token arguments C does not take
            return _flat_in_python(encoder, texts, threads, lines, eot, id_bytes, accept_bytes, first_offset)
        try:
            ids, offsets, problem = encode_flat(
                texts, threads, lines, -1 if eot is None else eot, id_bytes, accept_bytes, first_offset
            )
        except TypeError:
            for item in texts:  # the first text that is not a str: encode's TypeError
                if not isinstance(item, str) and not (accept_bytes and isinstance(item, bytes)):
                    encoder(item)
            raise
        if problem is None:
            return ids, offsets
        kind, index, offset = problem
        if kind == "refused":
            encoder(texts[index])  # raises encode's ValueError for the disallowed token
        raise NotUTF8Error(index, offset, texts[index][offset:offset + 4])

    def _batch_special_sets(
        self,
        allowed_special: Literal["all"] | AbstractSet[str],
        disallowed_special: Literal["all"] | Collection[str],
    ) -> tuple[AbstractSet[str], frozenset[str]]:
        """The batches' special-token arguments resolved once for all texts: "all" replaced,
        the disallowed tokens frozen (what `_special_batch_encoder` is keyed by)."""
        if allowed_special == "all":
            allowed_special = self._allowed_all()
        if disallowed_special == "all":
            disallowed_special = self._refused_besides(allowed_special)
        if not isinstance(disallowed_special, frozenset):
            disallowed_special = frozenset(disallowed_special)
        return allowed_special, disallowed_special

    def _special_batch_encoder(
        self, allowed_special: AbstractSet[str], refused: frozenset[str], *, flat: bool = False
    ) -> Any:
        """The C batch encoder for `encode` with these allowed and refused special tokens (see
        CoreBPE.special_batch_encoder, and with `flat` CoreBPE.flat_batch_encoder), kept per
        pair of sets; None for what it cannot do (a custom pattern, an allowed set that is no
        set: `encode` then says what is wrong)."""
        if not isinstance(allowed_special, (set, frozenset)):
            return None
        key = (frozenset(allowed_special), refused, flat)
        cache = self.__dict__.setdefault("_special_batch_cache", {})
        if key not in cache:
            make = self._core_bpe.flat_batch_encoder if flat else self._core_bpe.special_batch_encoder
            try:
                encode_many = make(refused, key[0])
            except TypeError:  # an allowed token that is no str: encode says so
                encode_many = None
            if len(cache) >= 16:
                cache.clear()
            cache[key] = encode_many
        return cache[key]

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """Encodes a string into stable tokens and the possible completion sequences.

        The stable tokens cover a prefix of `text`; every completion, appended to them,
        decodes to bytes that start with `text`.  Completions come in no particular order.
        See `encode` for the options.  This API should itself be considered unstable.

        ```
        >>> enc.encode_with_unstable("hello fanta")
        ([31373], [[277, 4910], [5113, 265], ..., [8842]])
        >>> text = "..."
        >>> stable_tokens, completions = enc.encode_with_unstable(text)
        >>> assert text.encode().startswith(enc.decode_bytes(stable_tokens))
        >>> assert all(enc.decode_bytes(stable_tokens + seq).startswith(text.encode())
        ...            for seq in completions)
        ```
        """
        allowed_special = self._check_special(text, allowed_special, disallowed_special)
        return self._core_bpe.encode_with_unstable(text, allowed_special)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """Encodes text or bytes that are exactly one token (special tokens included).

        Raises KeyError if it is not a token.

        ```
        >>> enc.encode_single_token("hello")
        31373
        ```
        """
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        return self._core_bpe.encode_single_token(text_or_bytes)

    # ====================
    # Decoding
    # ====================

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """Decodes a list of tokens into bytes.

        ```
        >>> enc.decode_bytes([31373, 995])
        b'hello world'
        ```
        """
        return self._core_bpe.decode_bytes(tokens)

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decodes a list of tokens into a string.

        Decoded bytes need not be valid UTF-8, so by default this is lossy; pass
        `errors="strict"` to raise instead.

        ```
        >>> enc.decode([31373, 995])
        'hello world'
        ```
        """
        if errors == "replace" and self._core_bpe._lean_decode is not None:
            text = self._core_bpe._lean_decode(tokens)  # one C call; None: see decode_bytes
            if text is not None:
                return text
        return self._core_bpe.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """Decodes one token into bytes (special tokens included).

        Raises KeyError if the token is not in the vocabulary.

        ```
        >>> enc.decode_single_token_bytes(31373)
        b'hello'
        ```
        """
        return self._core_bpe.decode_single_token_bytes(token)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """Decodes a list of tokens into a list of bytes, one per token.

        ```
        >>> enc.decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        ```
        """
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Decodes tokens into a string and the character offset where each token starts.

        When a token starts inside a character, its offset is that character's. Raises
        UnicodeDecodeError if the tokens do not decode to valid UTF-8.

        ```
        >>> enc.decode_with_offsets([31373, 995])
        ('hello world', [0, 5])
        ```
        """
        token_bytes = self.decode_tokens_bytes(tokens)

        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)))
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)

        text = b"".join(token_bytes).decode("utf-8", errors="strict")
        return text, offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """Decodes a batch (a list of lists of tokens) into a list of strings.

        With the C decoders (CPython) the batch is decoded on this thread: decoding is
        mostly making the str objects, which needs the GIL, so threads would only take
        turns (tiktoken decodes on a pool of num_threads).

        ```
        >>> enc.decode_batch([[31373], [995]])
        ['hello', ' world']
        ```
        """
        if self._core_bpe._lean_decode is not None:  # GIL-bound: threads would only take turns
            _usable_threads(num_threads)  # checked as tiktoken's pool checks it
            decode = self.decode
            return [decode(tokens, errors) for tokens in batch]
        decoder = functools.partial(self.decode, errors=errors)
        return _map_in_chunks(decoder, batch, num_threads)

    def decode_bytes_batch(
        self, batch: Sequence[Sequence[int]], *, num_threads: int = 8
    ) -> list[bytes]:
        """Decodes a batch (a list of lists of tokens) into a list of bytes (on this thread,
        as `decode_batch`).

        ```
        >>> enc.decode_bytes_batch([[31373], [995]])
        [b'hello', b' world']
        ```
        """
        if self._core_bpe._lean_decode_bytes is not None:  # GIL-bound, as decode_batch
            _usable_threads(num_threads)
            return [self.decode_bytes(tokens) for tokens in batch]
        return _map_in_chunks(self.decode_bytes, batch, num_threads)

    # ====================
    # Streaming and prefixes
    # ====================

    def stream_encoder(
        self,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> StreamEncoder:
        """An encoder for text that arrives in chunks: `feed(chunk)` returns the ids that have
        become final, `finish()` the rest.

        The ids, concatenated, equal `encode(whole_text)` with the same arguments for every
        way of cutting the text (str or UTF-8 bytes, cut anywhere, even inside a character
        or a special token).  Memory is the unresolved window, not the text.  See
        `tiktoken_inc.streaming.StreamEncoder`.

        ```
        >>> encoder = enc.stream_encoder()
        >>> encoder.feed("hello wor"), encoder.feed("ld"), encoder.finish()
        ([31373], [], [995])
        ```
        """
        allowed, refused = self._special_sets(allowed_special, disallowed_special)
        return StreamEncoder(self._core_bpe, allowed, refused)

    def stream_decoder(self, errors: str = "replace") -> StreamDecoder:
        """A decoder for ids that arrive in chunks: `feed(ids)` returns the complete text,
        holding back the bytes of an unfinished character; `finish()` returns the rest.

        The text, concatenated, equals `decode(all_ids, errors)` for every split.

        ```
        >>> decoder = enc.stream_decoder()
        >>> decoder.feed([31373]), decoder.feed([995]), decoder.finish()
        ('hello', ' world', '')
        ```
        """
        return StreamDecoder(self.decode_bytes, errors)

    def prefix_index(self, text_or_bytes: str | bytes) -> PrefixIndex:
        """One O(n log² t) pass over the text, then the tokens of any prefix in O(tokens).

        `.last_token(i)` is the last token of the BPE of the prefix of i bytes and
        `.encode(nbytes)` is `encode_ordinary(prefix)`.  Without pre-splitting both are
        exact for every prefix; with it, `last_token` follows the whole text's regex pieces
        (see `tiktoken_inc.prefix`) and `encode` is exact.  The last few indexes are cached.

        ```
        >>> index = enc.prefix_index("hello world")
        >>> index.encode(7), enc.decode([index.last_token(7)])
        ([31373, 266], ' w')
        ```
        """
        return prefix_index(self._core_bpe, text_or_bytes)

    def prefix_last_tokens(self, text_or_bytes: str | bytes) -> list[tuple[int, int]]:
        """For every byte end i = 1..n: (last token of the BPE of the prefix, its length).

        ```
        >>> enc.prefix_last_tokens("hi!")
        [(71, 1), (5303, 2), (0, 1)]
        ```
        """
        return self.prefix_index(text_or_bytes).last_tokens()

    def encode_prefix(self, text_or_bytes: str | bytes, nbytes: int) -> list[int]:
        """`encode_ordinary` of the first `nbytes` bytes of the text, read back from a cached
        prefix pass (so many prefixes of one text cost one pass plus their tokens).

        ```
        >>> enc.encode_prefix("hello world", 8)
        [31373, 24486]
        ```
        """
        return self.prefix_index(text_or_bytes).encode(nbytes)

    def heal(self, tokens: Sequence[int]) -> tuple[list[int], str]:
        """Token healing: splits a prompt's tokens into those no continuation can change and
        the text of the rest, to be regenerated (e.g. by constraining generation to start
        with it).

        A prompt cut mid-word ends in tokens that more text would merge or re-split
        (" fo" + "x" is " fox", not " fo" + "x").  `heal` keeps the longest prefix of `tokens`
        that is also a prefix of the encoding of every continuation of their text, i.e. the
        ids a stream encoder has already emitted for that text: everything before the last
        regex piece that may still change, and inside it what eager emission has fixed.
        Special tokens stay (the text after the last one is healed), except a last special
        token whose text, with the text after it, begins a longer special token's text
        (`<|a|>` when `<|a|>b` is also one): a continuation may still make that one of it,
        so it is healed with what follows.  The kept
        tokens end on a character boundary.  For a custom pattern that the C pre-splitter
        does not implement, the unstable part is tiktoken's: the last piece and the
        whitespace before it.

        ```
        >>> enc.heal(enc.encode("The quick brown fo"))
        ([464, 2068, 7586], ' fo')
        >>> enc.heal(enc.encode("hello world"))
        ([31373], ' world')
        ```
        """
        return heal(self._core_bpe, tokens)

    # ====================
    # Miscellaneous
    # ====================

    def token_byte_values(self) -> list[bytes]:
        """All mergeable tokens' bytes, sorted.

        ```
        >>> enc.token_byte_values()[:3]
        [b'\\x00', b'\\x01', b'\\x02']
        ```
        """
        return self._core_bpe.token_byte_values()

    def clear_cache(self) -> None:
        """Forgets the pieces this encoding keeps from one call to the next.

        Text repeats its words, and a word that is no token is encoded a byte at a time:
        each thread that encodes keeps the ids of up to 4,096 such pieces (of up to 27
        bytes) in a memo of 256 KiB, at most 16 memos per encoding, so that a piece that
        comes again costs a look-up.  The ids never depend on the memo.  This frees the
        memos that no call is using, for a benchmark that must time every call from cold,
        or to give the memory back; encoding goes on as before.

        ```
        >>> enc.encode_ordinary("Grüße aus Köln")
        [6600, 2448, 24352, 9608, 65994, 2312]
        >>> enc.clear_cache()
        >>> enc.encode_ordinary("Grüße aus Köln")
        [6600, 2448, 24352, 9608, 65994, 2312]
        ```
        """
        self._core_bpe.clear_cache()

    @property
    def eot_token(self) -> int:
        """The id of `<|endoftext|>` (KeyError if the encoding has none).

        ```
        >>> enc.eot_token
        50256
        ```
        """
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def _encode_default(self) -> Callable[[str], list[int] | None] | None:
        """`encode(text)` with the default arguments in one C call (None for special-token
        text or surrogates), or None where the text is split in Python (see CoreBPE).  Read
        on every default encode; `encode_batch` takes the batch form of the same C function
        through `_special_batch_encoder`."""
        return self._core_bpe.unless_special_encoder(self._all_special)

    @functools.cached_property
    def _count_default(self) -> Callable[..., int | None] | None:
        """`count_tokens(text, limit=limit)` with the default special-token arguments in one C
        call (limit + 1 for "more than limit"; None for special-token text, surrogates, no
        str or a bad limit), or None where the text is split in Python (see CoreBPE)."""
        return self._core_bpe.unless_special_counter(self._all_special)

    @functools.cached_property
    def _all_special(self) -> frozenset[str]:
        """The texts of all special tokens, frozen: what `allowed_special="all"` allows (its
        matcher is then found by a hash that frozenset computes once)."""
        return frozenset(self._special_tokens)

    @functools.cached_property
    def _held_encode(self) -> Any:
        """What `encode(text)` calls from C (the class holds `encode` as a held method, as it
        does `encode_ordinary`): the default call's C function (see `_watching`)."""
        return self._watching(self._encode_default)

    @functools.cached_property
    def _held_count(self) -> Any:
        """What `count_tokens(text)` and `count_tokens(text, limit=limit)` call from C: the
        default call's C counter (see `_watching`), called with (text) or (text, limit)."""
        return self._watching(self._count_default)

    def _watching(self, function: Callable[..., Any] | None) -> Any:
        """A default call's C function as a held method holds it: itself (None: the
        method), and once `special_tokens_set` is out (it may be changed, and what "all"
        disallows follows it) `(function, the set, its size when whole)`: the function while
        the set keeps that size, as the method's own check has it."""
        specials = self.__dict__.get("_special_tokens_set")
        if function is None or specials is None:
            return function
        return (function, specials, len(self._all_special))

    @functools.cached_property
    def _held_decode(self) -> Callable[[Any], str | None] | None:
        """What `decode(tokens)` calls from C: the ids of a list or tuple of ints decoded in
        one C call, invalid UTF-8 replaced (None: anything else -- the method says why)."""
        return self._core_bpe._lean_decode

    @functools.cached_property
    def _held_decode_bytes(self) -> Callable[[Any], bytes | None] | None:
        """What `decode_bytes(tokens)` calls from C, the same way."""
        return self._core_bpe._lean_decode_bytes

    @functools.cached_property
    def _held_token_bytes(self) -> Callable[[int], bytes | None] | None:
        """What `decode_single_token_bytes(token)` calls from C: the bytes of an int id in one
        C call (None: no such token, or no int -- the method says what is wrong)."""
        return self._core_bpe._lean_token_bytes

    @functools.cached_property
    def _held_token_rank(self) -> Callable[[str | bytes], int | None] | None:
        """What `encode_single_token(text_or_bytes)` calls from C: the id of the mergeable
        token that is exactly these bytes in one C call (None: anything else, special tokens
        included -- the method takes it)."""
        return self._core_bpe._lean_token_rank

    @property
    def special_tokens_set(self) -> set[str]:
        """The texts of all special tokens: a plain set, made on first use, that may be
        changed or replaced (as tiktoken's), and what "all" disallows then follows it.

        ```
        >>> enc.special_tokens_set
        {'<|endoftext|>'}
        ```
        """
        specials = self.__dict__.get("_special_tokens_set")
        if specials is None:
            specials = self.special_tokens_set = set(self._special_tokens.keys())
        return specials

    @special_tokens_set.setter
    def special_tokens_set(self, specials: set[str]) -> None:
        self.__dict__["_special_tokens_set"] = specials
        self.__dict__.pop("_held_encode", None)  # made again, watching this set
        self.__dict__.pop("_held_count", None)

    @special_tokens_set.deleter
    def special_tokens_set(self) -> None:
        self.__dict__.pop("_special_tokens_set", None)
        self.__dict__.pop("_held_encode", None)
        self.__dict__.pop("_held_count", None)

    def _special_texts(self) -> AbstractSet[str]:
        """`special_tokens_set` as it is, without making it: the frozen texts until someone
        has taken the set (internal calls need not)."""
        specials = self.__dict__.get("_special_tokens_set")
        return self._all_special if specials is None else specials

    def is_special_token(self, token: int) -> bool:
        """True if `token` is the id of a special token.

        ```
        >>> enc.is_special_token(50256)
        True
        ```
        """
        assert isinstance(token, int)
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """For backwards compatibility. Prefer to use `enc.max_token_value + 1`."""
        return self.max_token_value + 1

    @property
    def incremental(self) -> bool:
        """How the C core encodes this vocabulary: True for the incremental BPE.

        The incremental algorithm (worst case O(log² t) per byte, t the longest token) takes
        every vocabulary that has all 256 single bytes, no token over 4096 bytes and an
        automaton under 2**24 blocks (far above any real vocabulary); one whose merges go
        down in rank (open models' often do) gets new rule priorities, and a piece holding
        one of the few tokens no priorities cover is stepped exactly, token pair by token
        pair. Otherwise this is False and every piece uses an exact heap-based BPE
        (O(n log n) per piece). Results are the same either way.

        ```
        >>> tiktoken_inc.get_encoding("cl100k_base").incremental
        True
        ```
        """
        return self._core_bpe.incremental

    # ====================
    # Private
    # ====================

    def _check_special(
        self,
        text: str,
        allowed_special: Literal["all"] | AbstractSet[str],
        disallowed_special: Literal["all"] | Collection[str],
    ) -> AbstractSet[str]:
        """Resolves "all", raises for disallowed special-token text; returns the allowed set.

        As in tiktoken, the whole text is searched (an allowed special token's text may hold
        a disallowed one) and the error names the leftmost disallowed token found.
        """
        if allowed_special == "all":
            allowed_special = self._allowed_all()
        if disallowed_special == "all":
            disallowed_special = self._refused_besides(allowed_special)
        if disallowed_special:
            if not isinstance(disallowed_special, frozenset):
                disallowed_special = frozenset(disallowed_special)
            token = first_special_in(disallowed_special, text)
            if token is not None:
                raise_disallowed_special_token(token)
        return allowed_special

    def _allowed_all(self) -> AbstractSet[str]:
        """What `allowed_special="all"` allows: `special_tokens_set`, frozen while unchanged."""
        specials = self._special_texts()
        if len(specials) != len(self._all_special):  # the set was changed
            return specials
        return self._all_special

    def _refused_besides(self, allowed_special: AbstractSet[str]) -> AbstractSet[str]:
        """`special_tokens_set - allowed_special` (what "all" disallows), kept per frozen
        allowed set: with a thousand specials the difference costs more than the search."""
        specials = self._special_texts()
        # special_tokens_set is a plain set, as in tiktoken: one that was changed (its size
        # tells) is read afresh every time.
        if type(allowed_special) is not frozenset or len(specials) != len(self._special_tokens):
            return specials - allowed_special
        cache = self.__dict__.setdefault("_refused_cache", {})
        refused = cache.get(allowed_special)
        if refused is None:
            refused = frozenset(specials - allowed_special)
            if len(cache) >= 64:
                cache.clear()
            cache[allowed_special] = refused
        return refused

    def _special_sets(
        self,
        allowed_special: Literal["all"] | AbstractSet[str],
        disallowed_special: Literal["all"] | Collection[str],
    ) -> tuple[frozenset[str], frozenset[str]]:
        """tiktoken's resolution of the two special-token arguments, for the calls that find
        the specials as they read (bounded calls, streams): (the allowed special tokens of
        this encoding, the texts to refuse).  An allowed string that is no special token of
        this encoding is ordinary text, as in `encode`.

        ```
        >>> enc._special_sets("all", "all")
        (frozenset({'<|endoftext|>'}), frozenset())
        ```
        """
        if allowed_special == "all":
            allowed_special = self._allowed_all()
        elif not isinstance(allowed_special, (set, frozenset)):
            _require_set(allowed_special)  # tiktoken's TypeError
        if disallowed_special == "all":
            disallowed_special = self._refused_besides(allowed_special)
        allowed = frozenset(allowed_special) & self._special_texts()
        refused = disallowed_special if type(disallowed_special) is frozenset else frozenset(disallowed_special or ())
        return allowed, refused

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """Encodes text or bytes as one piece: no regex split, no special tokens.

        ```
        >>> enc._encode_single_piece("helloqqqq")
        [31373, 38227, 38227]
        ```
        """
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        return self._core_bpe.encode_single_piece(text_or_bytes)

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """Encodes a string with the regex split done piece by piece in Python.

        ```
        >>> enc._encode_only_native_bpe("hello world")
        [31373, 995]
        ```
        """
        if not self._pretokenize:
            return self._encode_single_piece(text)
        ret = []
        for piece in self._core_bpe._find(text):
            ret.extend(self._core_bpe.encode_single_piece(piece.encode("utf-8")))
        return ret

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Encodes bytes that need not be valid UTF-8 (as tiktoken's private method).

        ```
        >>> enc._encode_bytes(b"hello \\xff")
        [31373, 220, 187]
        ```
        """
        return self._core_bpe._encode_bytes(text)

    def __reduce__(self) -> tuple[Any, ...]:
        """Registered encodings pickle as the call that gets them by name (set by the
        registry, which made them); others as their arguments."""
        by_name = self.__dict__.get("_by_name")
        if by_name is not None:
            return by_name
        return (_rebuild, (self.__getstate__(),))

    def __getstate__(self) -> object:
        state = {
            "name": self.name,
            "pat_str": self._pat_str,
            "mergeable_ranks": dict(self._mergeable_ranks),
            "special_tokens": self._special_tokens,
        }
        if not self._pretokenize:
            state["pretokenize"] = False
        return state

    def __setstate__(self, value: object) -> None:
        self.__init__(**value)  # type: ignore[misc, arg-type]


# The method's one call, `self._ordinary_encoder(text)`, made from C: no Python frame per
# call (about 550 instructions, 4% of an English paragraph); still the class's method for
# inspect.signature, mock.patch.object and subclasses (_native.held_method).
Encoding.encode_ordinary = held_method(Encoding.encode_ordinary, "_ordinary_encoder")  # type: ignore[method-assign]
# encode(text) and count_tokens(text), the default calls, the same way: `self._held_encode(text)`
# from C, the method itself for any other call and where the held function declines
# (special-token text, lone surrogates, no str: None), which says what to do;
# count_tokens(text, limit=L) as well, a gateway's call (a count over L answered None).
Encoding.encode = held_method(Encoding.encode, "_held_encode", declines=True)  # type: ignore[method-assign]
Encoding.count_tokens = held_method(  # type: ignore[method-assign]
    Encoding.count_tokens, "_held_count", declines=True, limit_keyword="limit")
# Decoding, as a stream of ids is decoded a few at a time, the same way.
Encoding.decode = held_method(Encoding.decode, "_held_decode", declines=True)  # type: ignore[method-assign]
Encoding.decode_bytes = held_method(Encoding.decode_bytes, "_held_decode_bytes", declines=True)  # type: ignore[method-assign]
# One token each way, as the constrained-decoding libraries call them for every id of a
# vocabulary: one C call, the method where it declines.
Encoding.decode_single_token_bytes = held_method(  # type: ignore[method-assign]
    Encoding.decode_single_token_bytes, "_held_token_bytes", declines=True)
Encoding.encode_single_token = held_method(  # type: ignore[method-assign]
    Encoding.encode_single_token, "_held_token_rank", declines=True)


def _rebuild(state: dict[str, Any]) -> Encoding:
    """An Encoding from its pickled arguments (Encoding.__getstate__)."""
    encoding = Encoding.__new__(Encoding)
    encoding.__setstate__(state)
    return encoding


class NotUTF8Error(ValueError):
    """A text given as bytes (the corpus command's input) is not UTF-8: `index` is the text,
    `offset` the first bad byte in it."""

    def __init__(self, index: int, offset: int, bad: bytes):
        self.index = index
        self.offset = offset
        super().__init__(f"text {index} is not UTF-8: byte {offset} ({bad[:1]!r}) starts no character")


def _numpy(what: str) -> Any:
    """The numpy module, or an ImportError that says how to install it."""
    try:
        import numpy
    except ImportError:
        raise ImportError(
            f"{what} returns numpy arrays, and numpy is not installed: "
            "pip install 'tiktoken_inc[numpy]' (or pip install numpy)"
        ) from None
    return numpy


def _flat_in_python(
    encode: Callable[[str], list[int]],
    texts: Sequence[str | bytes],
    num_threads: int,
    lines: bool,
    eot: int | None,
    id_bytes: int,
    accept_bytes: bool,
    first_offset: int,
) -> tuple[Any, Any]:
    """`Encoding._encode_flat` through lists of ids, where the C flat batch is not available
    (a custom pattern, special-token arguments it does not take): the same result and errors,
    Python ints made on the way."""
    from array import array

    documents: list = []
    for index, text in enumerate(texts):
        if accept_bytes and isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as error:
                raise NotUTF8Error(index, error.start, text[error.start:error.start + 4]) from None
        if lines and isinstance(text, str):
            split = text.split("\n")
            documents += split[:-1] if split[-1] == "" else split
        else:
            documents.append(text)
    results = _map_in_chunks(encode, documents, num_threads)
    if eot is not None:
        for ids in results:
            ids.append(eot)
    offsets = array("q", itertools.accumulate(map(len, results), initial=first_offset))
    try:
        ids = array("I" if id_bytes == 4 else "H", itertools.chain.from_iterable(results))
    except OverflowError:
        raise ValueError(f"an id does not fit in {id_bytes} bytes: write wider ids") from None
    return bytearray(ids), bytearray(offsets)  # the types C returns


def _resolve_pretokenize(pat_str: str | None, pretokenize: bool | None) -> bool:
    """Whether an encoding pre-splits: `pretokenize` if given, else whether it has a pattern.

    ```
    >>> _resolve_pretokenize(None, None), _resolve_pretokenize(r"\\S+", None)
    (False, True)
    ```
    """
    if pretokenize is None:
        return pat_str is not None
    if not isinstance(pretokenize, bool):
        raise TypeError(f"pretokenize must be True or False, not {pretokenize!r}")
    if pretokenize and pat_str is None:
        raise ValueError("pretokenize=True needs a pat_str to split with; pass one, or pretokenize=False")
    return pretokenize


def _encode_ordinary(core_bpe: CoreBPE, text: str) -> list[int]:
    """Encoding.encode_ordinary: the method's body, and the fallback of its C function
    for what that hands back (a str with lone surrogates, replaced as tiktoken does, or no
    str: tiktoken's TypeError).  It takes the CoreBPE, not the Encoding, so that the bound
    C function makes no cycle."""
    try:
        return core_bpe.encode_ordinary(text)  # one C call for a str, when the C core splits
    except UnicodeEncodeError:
        return core_bpe.encode_ordinary(_replace_surrogates(text))


def _replace_surrogates(text: str) -> str:
    """Pairs surrogates up through UTF-16 and replaces lone ones with U+FFFD (as tiktoken).

    ```
    >>> _replace_surrogates("a\\ud800b")
    'a\\ufffdb'
    ```
    """
    return utf8_replacing_surrogates(text).decode("utf-8")
