"""Streaming: encode text as it arrives, decode ids as they arrive.

`Encoding.stream_encoder()` returns a `StreamEncoder`: feed it text (str) or UTF-8 bytes in
any chunks; each `feed` returns the ids that have become final (no continuation of the text
can change them) and `finish` returns the rest.  The ids of all calls, concatenated, equal
`enc.encode(whole_text)` with the same special-token arguments, however the text was cut --
inside a UTF-8 character, inside `<|endoftext|>`, anywhere.

`Encoding.stream_decoder()` returns a `StreamDecoder`: feed it ids, get text; it never emits
part of a character, and the concatenated text equals `enc.decode(all_ids)`.

```
>>> import tiktoken_inc
>>> enc = tiktoken_inc.get_encoding("cl100k_base")
>>> encoder = enc.stream_encoder(allowed_special={"<|endoftext|>"})
>>> encoder.feed("hello wor")            # "hello" is final, " wor" may still grow
[15339]
>>> encoder.feed("ld<|endof")            # " world" waits: a special token may follow
[]
>>> encoder.feed("text|>")
[1917, 100257]
>>> encoder.finish()
[]
>>> decoder = enc.stream_decoder()
>>> decoder.feed([15339, 1917]) + decoder.finish()
'hello world'
```

How it works: special tokens are found in the bytes as they arrive; only a tail that is a
proper prefix of an allowed special token is held back.  The text between specials goes to
the C streaming encoder (tiktoken's pre-split and the incremental BPE, with eager output);
at an allowed special the C stream is finished (the stretch ends there, as tiktoken's regex
sees it) and the special's id follows.  Memory is the unresolved window: the C stream's
pending bytes (a few hundred at most on the OpenAI vocabularies, even for megabytes of
spaces) plus fewer bytes than the longest special token.

Two cases are held until the stretch ends instead (exact, not eager; `eager` is False):
a custom `pat_str` that the C pre-splitter does not implement, and a vocabulary with
non-canonical tokens encoded by the incremental core with a pre-split pattern (the C stream
does not apply tiktoken's whole-piece shortcut there).  Without pre-splitting, such a
vocabulary holds only the first `max_token_bytes` bytes of each stretch (the stretch can be a
whole token only while it is that short).
"""
from __future__ import annotations

import codecs
import numbers
import re
from typing import TYPE_CHECKING, AbstractSet, Collection, Dict, List, Optional, Sequence, Union

from tiktoken_inc._corebpe import _require_set
from tiktoken_inc._native import NativeStream, NativeVocab, utf8_replacing_surrogates
from tiktoken_inc._tki import lib

if TYPE_CHECKING:
    from tiktoken_inc._corebpe import CoreBPE
    from tiktoken_inc.core import Encoding

__all__ = ["StreamEncoder", "StreamDecoder", "InvalidUTF8Error"]

Chunk = Union[str, bytes, bytearray, memoryview]


class InvalidUTF8Error(ValueError):
    """Bytes fed to a StreamEncoder are not UTF-8.

    `offset` is the position of the first bad byte in everything fed so far, `byte` its value.
    """

    def __init__(self, offset: int, byte: Optional[int], reason: str):
        self.offset = offset
        self.byte = byte
        what = f"byte {offset} ({byte:#04x})" if byte is not None else f"the input ends at byte {offset}"
        super().__init__(
            f"the bytes fed are not UTF-8: {what}: {reason}; feed str, or decode the bytes with "
            "errors='replace' first (an encoder for raw bytes has no tiktoken equivalent)"
        )


# ------------------------------------------------------------------ segment encoders
# The text between two allowed special tokens is a "stretch": tiktoken splits and encodes each
# stretch on its own.  A segment encoder encodes stretches: feed() their bytes, end() when the
# stretch ends.


class _NativeSegments:
    """Stretches encoded by the C stream (eager output)."""

    eager = True

    def __init__(self, vocab: NativeVocab, pattern: int):
        self._stream = NativeStream(vocab, pattern)

    def feed(self, data: bytes) -> List[int]:
        return self._stream.feed(data)

    def end(self) -> List[int]:
        return self._stream.finish()

    def pending(self) -> int:
        return lib.tki_stream_pending(self._stream._stream)

    def native_stats(self) -> Dict[str, int]:
        return self._stream.stats()


class _ShortcutSegments(_NativeSegments):
    """One-piece stretches for a vocabulary with non-canonical tokens: tiktoken's whole-piece
    shortcut (a stretch that is itself a token is that token) needs the stretch's first
    `limit` bytes held until it is longer than any token or ends."""

    def __init__(self, vocab: NativeVocab, limit: int):
        super().__init__(vocab, 0)
        self._vocab = vocab
        self._limit = limit
        self._held: Optional[bytearray] = bytearray()  # None once the stretch is too long

    def feed(self, data: bytes) -> List[int]:
        if self._held is None:
            return self._stream.feed(data)
        self._held += data
        if len(self._held) <= self._limit:
            return []
        held, self._held = bytes(self._held), None
        return self._stream.feed(held)

    def end(self) -> List[int]:
        held, self._held = self._held, bytearray()
        if held is None:
            return self._stream.finish()
        if not held:
            return []
        rank = self._vocab.rank(bytes(held))
        if rank is not None:
            return [rank]
        return self._stream.feed(bytes(held)) + self._stream.finish()

    def pending(self) -> int:
        return super().pending() + (len(self._held) if self._held is not None else 0)


class _HeldSegments:
    """Stretches held whole and encoded when they end (exact, not eager)."""

    eager = False

    def __init__(self, core: CoreBPE):
        self._core = core
        self._held = bytearray()

    def feed(self, data: bytes) -> List[int]:
        self._held += data
        return []

    def end(self) -> List[int]:
        held, self._held = bytes(self._held), bytearray()
        return self._core._ordinary(held.decode("utf-8")) if held else []

    def pending(self) -> int:
        return len(self._held)

    def native_stats(self) -> Dict[str, int]:
        return {}


def _segment_encoder(core: CoreBPE) -> Union[_NativeSegments, _HeldSegments]:
    """The best exact segment encoder for this CoreBPE (see the module docstring)."""
    vocab = core._vocab
    has_noncanonical = vocab.incremental and vocab.info["noncanonical_count"] > 0
    if not core.pretokenize:
        if has_noncanonical:
            return _ShortcutSegments(vocab, vocab.info["max_token_bytes"])
        return _NativeSegments(vocab, 0)
    if core._pattern is None or has_noncanonical:
        return _HeldSegments(core)
    return _NativeSegments(vocab, core._pattern)


# ------------------------------------------------------------------ special tokens in bytes


def _is_utf8(text: str) -> bool:
    """False for a str with lone surrogates (no UTF-8 of its own)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Specials:
    """A set of special tokens searched in UTF-8 bytes, as `special_token_regex` searches text.

    At a position the longest token wins, and the leftmost position wins; a byte search in
    valid UTF-8 finds exactly the matches a text search finds.
    """

    def __init__(self, tokens: Collection[str]):
        # (a lone surrogate's bytes never occur in the UTF-8 fed: such a token never matches)
        encoded = sorted({token.encode("utf-8", "surrogatepass") for token in tokens if token}, key=lambda t: (-len(t), t))
        self.pattern = re.compile(b"|".join(map(re.escape, encoded))) if encoded else None
        self.longest = max(map(len, encoded), default=0)
        #: Every proper, non-empty prefix of a token: the tails that may still become one.
        self.prefixes = frozenset(token[:k] for token in encoded for k in range(1, len(token)))
        self.first_bytes = bytes(sorted({token[0] for token in encoded if len(token) > 1}))
        #: "" is among the tokens (it matches at the start of every text).
        self.has_empty = "" in tokens

    def open_start(self, data: bytes, start: int) -> Optional[int]:
        """The leftmost position >= start where the rest of `data` is a proper prefix of a
        token (so a token may still start there), or None.

        ```
        >>> _Specials(["<|end|>"]).open_start(b"ab<|en", 0)
        2
        ```
        """
        if not self.prefixes:
            return None
        lowest = max(start, len(data) - self.longest + 1)
        best = None
        for first in self.first_bytes:
            at = data.find(first, lowest)
            while at != -1 and (best is None or at < best):
                if data[at:] in self.prefixes:
                    best = at
                    break
                at = data.find(first, at + 1)
        return best

    def first_certain(self, data: bytes, start: int, final: bool):
        """(match, open): the leftmost match at or after `start` if no continuation can change
        it (else None), and the leftmost position where a token may still start (None if
        `final` or nowhere)."""
        match = self.pattern.search(data, start) if self.pattern is not None else None
        opening = None if final else self.open_start(data, start)
        if match is not None and opening is not None and opening <= match.start():
            match = None
        return match, opening


# ------------------------------------------------------------------ the encoder


class StreamEncoder:
    """Encodes text fed in chunks; every id is returned as soon as it is final.

    Create with `Encoding.stream_encoder(allowed_special=..., disallowed_special=...)`
    (the same arguments and defaults as `Encoding.encode`).  `feed(chunk)` takes str or
    UTF-8 bytes (a chunk may end inside a character or a special token) and returns the ids
    that no continuation can change; `finish()` returns the remaining ids.  Concatenated,
    they equal `enc.encode(whole_text, ...)`.  After `finish()` the encoder is empty and may
    encode another text.

    A disallowed special token raises the ValueError `encode` raises, from the `feed` that
    completes it (ids returned earlier are then meaningless).  Bytes that are not UTF-8
    raise `InvalidUTF8Error` (a ValueError).  After an error the encoder refuses further
    input: start a new one.

    ```
    >>> encoder = enc.stream_encoder()
    >>> [encoder.feed(part) for part in ["The quick", " brown", " fox"]]
    [[791], [4062], [14198]]
    >>> encoder.finish()
    [39935]
    >>> encoder.stats["max_pending_bytes"]
    6
    ```
    """

    def __init__(
        self,
        encoding: Encoding,
        allowed_special: Union[str, AbstractSet[str]] = frozenset(),
        disallowed_special: Union[str, Collection[str]] = "all",
    ):
        if allowed_special == "all":
            allowed_special = encoding.special_tokens_set
        if disallowed_special == "all":
            disallowed_special = encoding.special_tokens_set - _require_set(allowed_special)
        allowed = frozenset(_require_set(allowed_special)).intersection(encoding._special_tokens)
        disallowed = frozenset(disallowed_special) if disallowed_special else frozenset()
        self._core = encoding._core_bpe
        self._allowed = _Specials(allowed)
        self._allowed_ids = {token.encode("utf-8"): encoding._special_tokens[token] for token in allowed}
        self._disallowed = _Specials(disallowed)
        self._surrogate_tokens = frozenset(t for t in disallowed if isinstance(t, str) and not _is_utf8(t))
        self._surrogate_tail = ""
        self._segments = _segment_encoder(self._core)
        self._validator = codecs.getincrementaldecoder("utf-8")("strict")
        self._utf8_pending = False  # the validator holds part of a character
        self._high_surrogate = ""  # a str chunk ended with half a surrogate pair
        self._held = b""  # bytes that may start an allowed special token
        self._recent = b""  # the tail that a disallowed special may straddle
        self._failed: Optional[BaseException] = None
        self._bytes_fed = 0
        self._emitted = 0
        self._max_pending = 0

    # -------------------------------------------------------------- public
    @property
    def eager(self) -> bool:
        """True when ids come out as they become final; False when this encoding's stretches
        are held until they end (a custom pattern; see the module docstring)."""
        return self._segments.eager

    @property
    def stats(self) -> Dict[str, int]:
        """Counters over the encoder's life (they survive `finish`).

        - bytes_fed, tokens_emitted: UTF-8 bytes taken and ids returned so far;
        - pending_bytes: bytes taken that no returned id covers yet (held here or in C);
        - max_pending_bytes: the largest window seen: the C stream's own maximum (measured
          after every byte) or pending_bytes after a feed, whichever is larger;
        - held_bytes: the part of pending_bytes held in Python (a possible special token's
          start, a stretch held whole when not eager);
        - live_ends: prefix ends the C stream keeps alive in its current piece.

        ```
        >>> encoder = enc.stream_encoder()
        >>> _ = encoder.feed(" " * 100_000)
        >>> encoder.stats["max_pending_bytes"] < 300
        True
        ```
        """
        native = self._segments.native_stats()
        pending = self._pending()
        return {
            "bytes_fed": self._bytes_fed,
            "tokens_emitted": self._emitted,
            "pending_bytes": pending,
            "max_pending_bytes": max(self._max_pending, pending, native.get("max_pending_bytes", 0)),
            "held_bytes": pending - native.get("pending_bytes", 0),
            "live_ends": native.get("live_ends", 0),
        }

    def feed(self, chunk: Chunk) -> List[int]:
        """Takes the next chunk (str, or UTF-8 bytes cut anywhere); returns the ids now final.

        ```
        >>> encoder = enc.stream_encoder()
        >>> encoder.feed("hello"), encoder.feed(" world"), encoder.finish()
        ([], [15339], [1917])
        ```
        """
        self._check_usable()
        try:
            data = self._utf8(chunk)
            ids = self._take(data, final=False)
        except BaseException as error:
            self._failed = error
            raise
        pending = self._pending()
        if pending > self._max_pending:
            self._max_pending = pending
        return ids

    def finish(self) -> List[int]:
        """Ends the text: returns the remaining ids; the encoder is then empty and reusable.

        ```
        >>> encoder = enc.stream_encoder()
        >>> encoder.feed("hello"), encoder.finish()
        ([], [15339])
        ```
        """
        self._check_usable()
        try:
            tail = b""
            if self._high_surrogate:  # half a pair at the very end: U+FFFD, as tiktoken
                self._high_surrogate = ""
                tail = "\ufffd".encode("utf-8")
                self._bytes_fed += len(tail)
            if self._utf8_pending:
                self._validate(tail, final=True)
            ids = self._take(tail, final=True)
            ids += self._end_stretch()
        except BaseException as error:
            self._failed = error
            raise
        self._validator.reset()
        self._utf8_pending = False
        self._held = self._recent = b""
        self._surrogate_tail = ""
        return ids

    # -------------------------------------------------------------- input
    def _check_surrogate_tokens(self, chunk: str) -> None:
        """Raises encode's ValueError for a disallowed token holding a lone surrogate (it is
        searched in the text as given, before surrogates are replaced), across chunks."""
        from tiktoken_inc.core import first_special_in, raise_disallowed_special_token

        window = self._surrogate_tail + chunk
        token = first_special_in(self._surrogate_tokens, window)
        if token is not None:
            raise_disallowed_special_token(token)
        longest = max(map(len, self._surrogate_tokens))
        self._surrogate_tail = window[len(window) - longest + 1:] if longest > 1 else ""

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise ValueError(
                f"this stream encoder failed earlier ({type(self._failed).__name__}: "
                f"{str(self._failed).splitlines()[0] if str(self._failed) else ''}); "
                "start a new one with enc.stream_encoder()"
            )

    def _utf8(self, chunk: Chunk) -> bytes:
        """The chunk as validated UTF-8 (str: lone surrogates replaced as tiktoken does)."""
        if isinstance(chunk, str):
            if self._surrogate_tokens:  # disallowed tokens with lone surrogates: searched in the str
                self._check_surrogate_tokens(chunk)
            data = self._str_bytes(chunk)
            if self._utf8_pending:  # a character cut in an earlier bytes chunk never ended
                self._validate(data)
            self._bytes_fed += len(data)
            return data
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            data = bytes(chunk)
            if self._high_surrogate:
                self._high_surrogate = ""
                data = "\ufffd".encode("utf-8") + data
            if self._utf8_pending or not data.isascii():
                self._validate(data)
            self._bytes_fed += len(data)
            return data
        raise TypeError(f"feed() takes str or bytes, not {type(chunk).__name__}")

    def _str_bytes(self, text: str) -> bytes:
        """UTF-8 of `text`; a trailing high surrogate waits for its partner in the next chunk."""
        if self._high_surrogate:
            text, self._high_surrogate = self._high_surrogate + text, ""
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._high_surrogate = text[:-1], text[-1]
        return utf8_replacing_surrogates(text)  # pairs joined, lone ones U+FFFD (tiktoken's rule)

    def _validate(self, data: bytes, final: bool = False) -> None:
        """Raises InvalidUTF8Error unless the bytes fed so far plus `data` may be UTF-8."""
        before = self._validator.getstate()[0]
        try:
            self._validator.decode(data, final)
        except UnicodeDecodeError as error:
            offset = self._bytes_fed - len(before) + error.start
            window = before + data
            byte = window[error.start] if error.start < len(window) else None
            raise InvalidUTF8Error(offset, byte, error.reason) from None
        self._utf8_pending = bool(self._validator.getstate()[0])

    # -------------------------------------------------------------- routing
    def _take(self, data: bytes, final: bool) -> List[int]:
        """Checks for disallowed specials, cuts at allowed ones, encodes the rest."""
        if self._disallowed.has_empty:  # "" occurs in every text: encode raises for it
            from tiktoken_inc.core import raise_disallowed_special_token

            raise_disallowed_special_token("")
        if self._disallowed.pattern is not None:
            self._check_disallowed(data, final)
        ids = self._route(data, final)
        self._emitted += len(ids)
        return ids

    def _check_disallowed(self, data: bytes, final: bool) -> None:
        """Raises encode's ValueError once a disallowed special token is certain."""
        from tiktoken_inc.core import raise_disallowed_special_token

        window = self._recent + data if self._recent else data
        match, _ = self._disallowed.first_certain(window, 0, final)
        if match is not None:
            raise_disallowed_special_token(match.group().decode("utf-8"))
        keep = self._disallowed.longest - 1
        self._recent = window[max(0, len(window) - keep):] if keep > 0 else b""

    def _route(self, data: bytes, final: bool) -> List[int]:
        """Sends text to the stretch encoder; at each certain allowed special, ends the
        stretch and adds the special's id; holds a tail that may start one."""
        buffer = self._held + data if self._held else data
        self._held = b""
        if self._allowed.pattern is None:
            return self._segments.feed(buffer) if buffer else []
        ids: List[int] = []
        position = 0
        while True:
            match, opening = self._allowed.first_certain(buffer, position, final)
            if match is not None:
                if match.start() > position:
                    ids += self._segments.feed(buffer[position:match.start()])
                ids += self._segments.end()
                ids.append(self._allowed_ids[match.group()])
                position = match.end()
                continue
            stop = len(buffer) if opening is None else opening
            if stop > position:
                ids += self._segments.feed(buffer[position:stop])
            self._held = buffer[stop:]
            return ids

    def _end_stretch(self) -> List[int]:
        ids = self._segments.end()
        self._emitted += len(ids)
        return ids

    def _pending(self) -> int:
        return len(self._held) + self._segments.pending()


# ------------------------------------------------------------------ the decoder


class StreamDecoder:
    """Decodes ids fed in chunks to text, never emitting part of a character.

    Create with `Encoding.stream_decoder(errors="replace")`.  `feed(ids)` returns the text
    that is complete; the last one to three bytes of an unfinished UTF-8 character wait for
    the next ids.  `finish()` returns what is left (an unfinished character becomes U+FFFD
    with errors="replace").  Concatenated, the text equals `enc.decode(all_ids, errors)`
    for every way of splitting the ids: invalid bytes are replaced exactly where the one-shot
    decode replaces them.  Special tokens decode to their text.  After `finish()` the
    decoder is empty and reusable.

    ```
    >>> decoder = enc.stream_decoder()
    >>> ids = enc.encode("😀!")          # [76460, 222, 0]: the emoji is cut in two tokens
    >>> [decoder.feed([i]) for i in ids] + [decoder.finish()]
    ['', '😀', '!', '']
    ```
    """

    def __init__(self, encoding: Encoding, errors: str = "replace"):
        codecs.lookup_error(errors)  # LookupError now, not at the first feed
        self._decode_bytes = encoding.decode_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)
        self.errors = errors

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished character held for the next feed (0 to 3)."""
        return len(self._decoder.getstate()[0])

    def feed(self, tokens: Union[int, Sequence[int]]) -> str:
        """Decodes the next ids (or one id); returns the text that is complete.

        Raises KeyError for an unknown id, as `decode` does.

        ```
        >>> decoder = enc.stream_decoder()
        >>> decoder.feed([15339]), decoder.feed(1917), decoder.finish()
        ('hello', ' world', '')
        ```
        """
        if isinstance(tokens, numbers.Integral):
            tokens = [int(tokens)]
        return self._decoder.decode(self._decode_bytes(tokens))

    def finish(self) -> str:
        """Returns the rest (an unfinished character is an error, as in `decode`); resets."""
        try:
            return self._decoder.decode(b"", True)
        finally:
            self._decoder.reset()
