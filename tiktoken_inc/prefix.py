"""All-prefix access and token healing.

`Encoding.prefix_index(text)` runs the incremental BPE over the text once (O(n log² t)) and
keeps, for every byte end i, the last token of the BPE of the prefix ending there.  From that:

- `PrefixIndex.last_token(i)` / `last_tokens()`: the last token (and its length) at every end;
- `PrefixIndex.encode(nbytes)`: the ids of `enc.encode_ordinary(prefix)` for any prefix, read
  back from the pass (each BPE result is the chain last_token(i), last_token(i - len), ...)
  instead of re-encoding;
- `Encoding.heal(tokens)`: drops the tokens that a continuation of the text could still
  change, and returns the text they stood for, to be regenerated.

What "the BPE of the prefix" means:

- Without pre-splitting (`get_encoding(name, pretokenize=False)`), exactly the encoding of
  the prefix: `last_token(i) == enc.encode_ordinary(prefix)[-1]` for every i (byte ends
  inside a character included).
- With pre-splitting, the pass runs over the whole text's regex pieces: `last_token(i)` is
  the last token of the BPE of the whole text's piece that holds byte i - 1, cut at i.  That
  is `enc.encode_ordinary(text[:i])[-1]` wherever the regex splits the prefix as it splits
  the whole text up to i, which is nearly everywhere; it differs at the few ends where the
  split itself depends on what follows (a contraction cut after its apostrophe, the last
  space of a run before a word).  `encode(nbytes)` is exact everywhere: it re-splits the
  prefix (in C) and re-encodes only the pieces that differ from the whole text's.

Costs (4 MB of English, cl100k): the pass is O(n log² t) in C plus one Python call per regex
piece (about 0.5 s with pre-splitting, 0.2 s without); memory is 4 bytes per input byte
plus the whole text's ids.  With pre-splitting, `encode(nbytes)` re-splits the prefix in C
(about 15 ns per byte) and copies the shared ids (about 30 ms for a 2 MB prefix, against
90 ms to encode it afresh); without it, it walks the ids back in Python (about 0.1 µs per
token).

```
>>> import tiktoken_inc
>>> enc = tiktoken_inc.get_encoding("cl100k_base")
>>> index = enc.prefix_index("hello world")
>>> index.encode(8) == enc.encode_ordinary("hello wo")
True
>>> [enc.decode([t]) for t, _ in index.last_tokens()]
['h', 'he', 'hel', 'hell', 'hello', ' ', ' w', ' wo', ' wor', 'l', ' world']
>>> enc.heal(enc.encode("The quick brown fo"))
([791, 4062, 14198], ' fo')
```
"""
from __future__ import annotations

import bisect
import itertools
import operator
import threading
import weakref
from array import array
from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple, Union

from tiktoken_inc._native import pretokenize_ends, str_utf8
from tiktoken_inc.streaming import StreamEncoder

if TYPE_CHECKING:
    from tiktoken_inc._corebpe import CoreBPE

__all__ = ["PrefixIndex", "heal", "prefix_index"]

TextOrBytes = Union[str, bytes]


def _as_bytes(text: TextOrBytes) -> bytes:
    if isinstance(text, str):
        return str_utf8(text)  # lone surrogates: tiktoken's replacement
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"expected str or bytes, not {type(text).__name__}")


def _piece_ends(core: CoreBPE, data: bytes) -> array:
    """Byte ends of the regex pieces of UTF-8 `data` (C pre-splitter, or `regex`), as array('Q')."""
    if not data:
        return array("Q")
    if core._pattern is not None:
        return pretokenize_ends(core._pattern, data)
    joined, ends_list = core._split(data.decode("utf-8"))
    if joined != data:
        raise ValueError(
            "this encoding's pat_str skips some text (its pieces do not cover the input), so "
            "prefixes of the text have no well-defined tokens; use a pattern that matches everything"
        )
    return array("Q", ends_list)


class PrefixIndex:
    """The BPE of every prefix of one text, from one pass (see the module docstring).

    Build with `Encoding.prefix_index(text_or_bytes)`.  Memory: 4 bytes per input byte plus
    the whole text's ids.  Needs the incremental core (`enc.incremental`); raises ValueError
    for a vocabulary encoded by the heap fallback.

    ```
    >>> index = enc.prefix_index("hello world")
    >>> len(index), index.last_token(5), index.encode(5)
    (11, 15339, [15339])
    ```
    """

    def __init__(self, core: CoreBPE, text: TextOrBytes):
        vocab = core._vocab
        if not vocab.incremental:
            raise ValueError(
                "prefix access needs the incremental core, but this encoding uses the heap BPE "
                "fallback (its vocabulary lacks a single byte, has a token over 4096 bytes, or "
                "needs an automaton too large for the core; see enc.incremental); "
                "encode each prefix with enc.encode_ordinary instead"
            )
        data = _as_bytes(text)
        self.data: bytes = data
        self.pretokenize: bool = core.pretokenize
        self._core = core
        self._vocab = vocab
        self._lengths = vocab.token_lengths()
        if self.pretokenize and not isinstance(text, str):  # (a str's UTF-8 is valid)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"with pre-splitting the text must be UTF-8 (byte {error.start} is not); "
                    "use an encoding from get_encoding(name, pretokenize=False) for raw bytes"
                ) from None
        self._lock = threading.Lock()  # the lazy parts below are made once
        self._ends_made: array | None = None
        #: last[i]: the last token of the plain BPE of the piece holding byte i - 1, cut at i.
        self._last = self._run_pass()
        #: Ends where the piece's start..i is itself a non-canonical token (tiktoken's
        #: whole-piece shortcut gives that token there; the plain BPE does not).
        self._shortcut: Dict[int, int] = {}
        if vocab.info["noncanonical_count"]:
            self._find_shortcuts(vocab.info["max_token_bytes"])
        self._whole: List[int] | None = None
        self._token_ends: array | None = None

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"<PrefixIndex of {len(self.data)} bytes, {len(self._ends)} pieces>"

    @property
    def _ends(self) -> array:
        """The byte ends of the text's pieces (made when first needed)."""
        if self._ends_made is None:
            with self._lock:
                if self._ends_made is None:
                    if self.pretokenize:
                        self._ends_made = _piece_ends(self._core, self.data)
                    else:
                        self._ends_made = array("Q", [len(self.data)] if self.data else [])
        return self._ends_made

    # -------------------------------------------------------------- the pass
    def _run_pass(self) -> memoryview:
        """The steps of every piece in one C pass (4 bytes per byte); for a pattern split in
        Python, one C pass per piece."""
        core, data, vocab = self._core, self.data, self._vocab
        if not self.pretokenize:
            return vocab.prefix_pass(0, data)
        if core._pattern is not None:
            return vocab.prefix_pass(core._pattern, data)
        last = memoryview(bytearray(4 * (len(data) + 1))).cast("I")
        start = 0
        for end in self._ends:
            last[start + 1:end + 1] = vocab.prefix_pass(0, data[start:end])[1:]
            start = end
        return last

    def _find_shortcuts(self, limit: int) -> None:
        """Records the ends where a piece's start..end is itself a token that its plain BPE
        does not give (a non-canonical token: tiktoken's whole-piece shortcut applies)."""
        data, last, rank_of = self.data, self._last, self._vocab.rank
        start = 0
        for end in self._ends:
            for size in range(2, min(end - start, limit) + 1):
                rank = rank_of(data[start:start + size])
                if rank is not None and rank != last[start + size]:
                    self._shortcut[start + size] = rank
            start = end

    # -------------------------------------------------------------- queries
    def _check_end(self, i: int, lowest: int) -> int:
        """`i` as an int in lowest..len; TypeError / IndexError otherwise."""
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"byte ends are integers, not {type(i).__name__}") from None
        if not lowest <= i <= len(self.data):
            raise IndexError(f"byte end {i} is outside {lowest}..{len(self.data)} (the text has {len(self.data)} bytes)")
        return i

    def last_token(self, i: int) -> int:
        """The last token of the BPE of the prefix ending at byte i (1 <= i <= len).

        ```
        >>> enc.decode([enc.prefix_index("hello world").last_token(8)])
        ' wo'
        ```
        """
        i = self._check_end(i, 1)
        return self._shortcut.get(i, self._last[i])

    def last_tokens(self) -> List[Tuple[int, int]]:
        """(last token, its length in bytes) for every byte end 1..len, in order.

        ```
        >>> enc.prefix_index("hi!").last_tokens()
        [(71, 1), (6151, 2), (0, 1)]
        ```
        """
        lengths, shortcut = self._lengths, self._shortcut
        tokens = list(self._last[1:])
        for end, rank in shortcut.items():
            tokens[end - 1] = rank
        return [(token, lengths[token]) for token in tokens]

    def encode(self, nbytes: int) -> List[int]:
        """`enc.encode_ordinary(prefix)` for the prefix of `nbytes` bytes, from the pass.

        Without pre-splitting any byte count is allowed; with it, `nbytes` must fall on a
        character boundary (the regex splits characters, not bytes).

        ```
        >>> enc.prefix_index("hello world").encode(7)
        [15339, 289]
        ```
        """
        n = self._check_end(nbytes, 0)
        if not self.pretokenize:
            return self._walk(0, n)
        if n == len(self.data):
            return list(self._whole_tokens())
        if self.data[n] & 0xC0 == 0x80:
            raise ValueError(
                f"byte {n} is inside a UTF-8 character: with pre-splitting, prefixes end on "
                "character boundaries (use an encoding with pretokenize=False for byte prefixes)"
            )
        if n == 0:
            return []
        ends = _piece_ends(self._core, self.data[:n])
        same = self._common_pieces(ends)
        start = ends[same - 1] if same else 0
        token_ends = self._whole_token_ends()
        tokens = self._whole_tokens()[: bisect.bisect_right(token_ends, start)]
        for end in ends[same:]:
            tokens += self._encode_piece(start, end)
            start = end
        return tokens

    # -------------------------------------------------------------- helpers
    def _walk(self, start: int, end: int) -> List[int]:
        """The BPE (with tiktoken's whole-piece shortcut) of data[start:end], where `start`
        begins a piece of the pass and `end` does not pass that piece's end."""
        if end == start:
            return []
        rank = self._shortcut.get(end)
        if rank is not None:
            return [rank]
        last, lengths = self._last, self._lengths
        out = []
        i = end
        while i > start:
            token = last[i]
            out.append(token)
            i -= lengths[token]
        out.reverse()
        return out

    def _encode_piece(self, start: int, end: int) -> List[int]:
        """One piece of a prefix's split: read back from the pass when it is the start of one
        of the whole text's pieces, else encoded afresh (shortcut included)."""
        k = bisect.bisect_right(self._ends, start)
        piece_start = self._ends[k - 1] if k else 0
        if piece_start == start and end <= self._ends[k]:
            return self._walk(start, end)
        return self._vocab.encode_joined(self.data[start:end], [end - start])

    def _common_pieces(self, ends: array) -> int:
        """How many leading pieces the prefix's split shares with the whole text's split.

        The splits can only differ near the prefix's end, so the search gallops back from
        there: a few comparisons of the two ends arrays as bytes (memcmp), each O(n) in C.
        """
        mine, theirs, width = ends.tobytes(), self._ends.tobytes(), ends.itemsize
        count = min(len(ends), len(self._ends))

        def agree(k: int) -> bool:
            return mine[: width * k] == theirs[: width * k]

        high, step = count, 1  # the first `high` pieces do not all agree (unless high == count)
        low = max(0, count - step)
        if agree(count):
            return count
        while low > 0 and not agree(low):
            high, step = low, step * 2
            low = max(0, count - step)
        while high - low > 1:  # the first `low` agree, the first `high` do not
            middle = (low + high) // 2
            if agree(middle):
                low = middle
            else:
                high = middle
        return low

    def _whole_tokens(self) -> List[int]:
        if self._whole is None:
            if self.pretokenize:
                self._whole = self._core._ordinary(self.data.decode("utf-8"))
            else:
                self._whole = self._walk(0, len(self.data))
        return self._whole

    def _whole_token_ends(self) -> array:
        if self._token_ends is None:
            self._token_ends = array("Q", itertools.accumulate(map(self._lengths.__getitem__, self._whole_tokens())))
        return self._token_ends


# ------------------------------------------------------------------ per-encoding cache

_cache_lock = threading.Lock()
#: Per encoding, its last few (text, index) pairs, the most recent last.  Looked up by
#: identity, then by equality (a memcmp after a length check): a text's hash would read
#: all of it (siphash: about 12M instructions for 4 MiB, a fifth of a pass over spaces).
_caches: "weakref.WeakKeyDictionary[CoreBPE, List[Tuple[TextOrBytes, PrefixIndex]]]" = weakref.WeakKeyDictionary()
_CACHE_SIZE = 4


def _cached(cache: List[Tuple[TextOrBytes, PrefixIndex]], text: TextOrBytes) -> PrefixIndex | None:
    """The index of `text` in `cache` (moved to the end), or None."""
    for k, (kept, index) in enumerate(cache):
        if kept is text or (type(kept) is type(text) and len(kept) == len(text) and kept == text):
            cache.append(cache.pop(k))
            return index
    return None


def prefix_index(core: CoreBPE, text: TextOrBytes) -> PrefixIndex:
    """The PrefixIndex of `text`, shared by the last few calls with the same text (a str or
    bytes; a mutable buffer is indexed afresh each time)."""
    if type(text) is not str and type(text) is not bytes:
        return PrefixIndex(core, text)
    with _cache_lock:
        cache = _caches.setdefault(core, [])
        index = _cached(cache, text)
        if index is not None:
            return index
    index = PrefixIndex(core, text)
    with _cache_lock:
        if _cached(cache, text) is None:
            cache.append((text, index))
            del cache[:-_CACHE_SIZE]
    return index


# ------------------------------------------------------------------ healing


def _special_may_grow(core: CoreBPE, text: bytes) -> bool:
    """True if `text` (a special token's text and what follows it) is a proper prefix of a
    special token's text: a continuation may make that token of it.

    ```
    >>> _special_may_grow(toy._core_bpe, b"<|a|>")  # with specials <|a|> and <|a|>b
    True
    ```
    """
    return any(len(special) > len(text) and special.startswith(text)
               for special in map(str.encode, core._special_tokens))


def heal(core: CoreBPE, tokens: Sequence[int]) -> Tuple[List[int], str]:
    """(kept tokens, text to regenerate) for a prompt's tokens (see Encoding.heal)."""
    tokens = list(tokens)
    data = core.decode_bytes(tokens)  # KeyError for unknown ids, as decode
    specials = core._special_values
    cut = next((k + 1 for k in range(len(tokens) - 1, -1, -1) if tokens[k] in specials), 0)
    lengths = core._vocab.token_lengths()
    if cut > 0 and _special_may_grow(core, data[len(data) - sum(lengths[t] for t in tokens[cut - 1:]):]):
        # The last special token's text and what follows begin a longer special token's
        # text: more text may still turn it into that one, so it is healed too.
        cut = next((k + 1 for k in range(cut - 2, -1, -1) if tokens[k] in specials), 0)
    head, rest = tokens[:cut], tokens[cut:]
    tail = data[len(data) - sum(lengths[t] for t in rest):] if rest else b""
    try:
        text = tail.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"heal needs tokens that decode to whole UTF-8 characters, but byte {error.start} of the "
            "text after the last special token is not (a character cut at the end?); "
            "drop the incomplete tokens first"
        ) from None
    # Specials allowed: a tail that may still become one (`<|endoft`) is not stable either.
    encoder = StreamEncoder(core, frozenset(core._special_tokens), frozenset())
    if encoder.eager:
        stable = encoder.feed(text)
    else:  # a custom pattern: tiktoken's notion (the last piece and whitespace before it)
        ids, last = core._encode_native(text, frozenset())
        stable = ids[: len(ids) - core._increase_last_piece_token_len(ids, last)]
    kept = 0
    while kept < len(rest) and kept < len(stable) and rest[kept] == stable[kept]:
        kept += 1
    boundary = sum(lengths[t] for t in rest[:kept])
    while kept > 0 and boundary < len(tail) and tail[boundary] & 0xC0 == 0x80:
        kept -= 1  # the kept tokens must end on a character boundary
        boundary -= lengths[rest[kept]]
    return head + rest[:kept], tail[boundary:].decode("utf-8")
