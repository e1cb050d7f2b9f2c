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

How it works: each feed is one call into the C stream (csrc/stream.c), the same engine as
`encode`: it checks the bytes are UTF-8, finds the special tokens that are certain (only a
tail that may still become an allowed one is held back), encodes the pieces that are final
exactly as one-shot encoding does, and takes the open piece on eagerly.  Memory is the
unresolved window: the C stream's pending bytes (a few hundred at most on the OpenAI
vocabularies, even for megabytes of spaces), plus, with pre-splitting, the bytes of the
piece still open.

A custom `pat_str` that the C pre-splitter does not implement is split with `regex`; then
each stretch between special tokens is held until it ends (exact, not eager: `eager` is
False).
"""
from __future__ import annotations

import codecs
import numbers
import threading
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Union

from tiktoken_inc._corebpe import raise_disallowed_special_token, refusal
from tiktoken_inc._native import (
    STATUS_INVALID_UTF8,
    STATUS_NOMEM,
    STATUS_REFUSED_SPECIAL,
    UTF8_REASONS,
    held_method,
    status_message,
    utf8_replacing_surrogates,
)

if TYPE_CHECKING:
    from tiktoken_inc._corebpe import CoreBPE

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
    input: start a new one.  An encoder is for one thread at a time: a call while another
    thread's call is under way raises RuntimeError (and changes nothing).

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

    def __init__(self, core: CoreBPE, allowed: frozenset[str], refused: frozenset[str]):
        self._refusal = refusal(refused)
        if self._refusal is None:  # a refused token that is not a str: tiktoken's TypeError
            from tiktoken_inc._corebpe import special_token_regex

            special_token_regex(refused).search("")
        self._stream = core.stream(allowed, refused)
        if self._stream is None:  # a custom pattern split in Python: held stretches
            self._stream = _HeldStretches(core, allowed, refused)
        self._feed, self._finish = self._stream.feed, self._stream.finish
        self._high_surrogate = ""  # a str chunk ended with half a surrogate pair
        self._failed: Optional[str] = None  # why it failed, once it has
        #: Refused texts with lone surrogates: the C search sees the text's UTF-8 (surrogates
        #: replaced), so these are looked for in the str chunks themselves.
        self._surrogate_refused = frozenset(t for t in refused if any("\ud800" <= c <= "\udfff" for c in t))
        self._recent = ""  # the tail of the str fed, for a refused text that straddles chunks
        #: Every chunk goes straight to the C call (else _feed_slowly looks at it first).
        self._plain = not self._surrogate_refused and not (self._refusal is not None and self._refusal.has_empty)
        #: The C feed while the next chunk can go straight to it (plain, no half surrogate
        #: pair held, not failed), else None.  `feed`, as the class holds it, calls it from C
        #: with no Python frame (_native.held_method), and this method where it declines.
        self._fast_feed: Optional[Callable[[Chunk], Optional[List[int]]]] = None
        self._update_fast_feed()

    # -------------------------------------------------------------- public
    @property
    def eager(self) -> bool:
        """True when ids come out as they become final; False when this encoding's stretches
        are held until they end (a custom pattern; see the module docstring)."""
        return not isinstance(self._stream, _HeldStretches)

    @property
    def stats(self) -> Dict[str, int]:
        """Counters over the encoder's life (they survive `finish`).

        - bytes_fed, tokens_emitted: UTF-8 bytes taken and ids returned so far;
        - pending_bytes: bytes taken that no returned id covers yet;
        - max_pending_bytes: the largest pending_bytes after any call;
        - live_ends: prefix ends of the open piece not yet emitted.

        ```
        >>> encoder = enc.stream_encoder()
        >>> _ = encoder.feed(" " * 100_000)
        >>> encoder.stats["max_pending_bytes"] < 300
        True
        ```
        """
        return self._stream.stats()

    def feed(self, chunk: Chunk) -> List[int]:
        """Takes the next chunk (str, or UTF-8 bytes cut anywhere); returns the ids now final.

        ```
        >>> encoder = enc.stream_encoder()
        >>> encoder.feed("hello"), encoder.feed(" world"), encoder.finish()
        ([], [15339], [1917])
        ```
        """
        try:
            if self._fast_feed is not None:
                ids = self._fast_feed(chunk)  # one C call
                if ids is not None:
                    return ids
            return self._feed_slowly(chunk)
        except RuntimeError:
            raise  # another thread's call has the stream: this one changed nothing
        except BaseException as error:
            self._note_failure(error)
            raise

    def finish(self) -> List[int]:
        """Ends the text: returns the remaining ids; the encoder is then empty and reusable.

        ```
        >>> encoder = enc.stream_encoder()
        >>> encoder.feed("hello"), encoder.finish()
        ([], [15339])
        ```
        """
        try:
            self._check_usable()
            ids: List[int] = []
            if self._high_surrogate:  # half a pair at the very end: U+FFFD, as tiktoken
                self._high_surrogate = ""
                self._update_fast_feed()
                ids = self._checked(self._feed("\ufffd"))
            if self._refusal is not None and self._refusal.has_empty:
                self._refuse("")
            ids += self._checked(self._finish())
        except RuntimeError:
            raise
        except BaseException as error:
            self._note_failure(error)
            raise
        self._recent = ""
        return ids

    # -------------------------------------------------------------- the slow paths
    def _feed_slowly(self, chunk: Chunk) -> List[int]:
        """feed for what the C call does not take: a failed stream, a str with lone
        surrogates (paired across chunks, lone ones U+FFFD, as tiktoken), refused texts with
        surrogates, and "" refused (tiktoken's regex finds it in every text)."""
        self._check_usable()
        if self._refusal is not None and self._refusal.has_empty:
            self._refuse("")
        if isinstance(chunk, str):
            if self._surrogate_refused:
                window = self._recent + chunk
                for token in self._surrogate_refused:
                    if token in window:
                        self._refuse(token)
                longest = max(map(len, self._surrogate_refused))
                self._recent = window[len(window) - longest + 1:] if longest > 1 else ""
            text = self._high_surrogate + chunk
            self._high_surrogate = ""
            if text and "\ud800" <= text[-1] <= "\udbff":
                text, self._high_surrogate = text[:-1], text[-1]
            self._update_fast_feed()
            ids = self._feed(text)
            if ids is None and self._stream.info()["status"] == 0:  # lone surrogates
                ids = self._feed(utf8_replacing_surrogates(text), True)
            return self._checked(ids)
        if self._high_surrogate and isinstance(chunk, (bytes, bytearray, memoryview)):
            self._high_surrogate = ""
            self._update_fast_feed()
            head = self._checked(self._feed("\ufffd"))
            return head + self._checked(self._feed(chunk))
        return self._checked(self._feed(chunk))

    def _checked(self, ids: Optional[List[int]]) -> List[int]:
        """The ids of a C call, or the error of a stream that failed."""
        if ids is not None:
            return ids
        raise self._error()

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise ValueError(
                f"this stream encoder failed earlier ({self._failed}); start a new one with enc.stream_encoder()"
            )

    def _refuse(self, token: str) -> None:
        raise_disallowed_special_token(token)

    def _update_fast_feed(self) -> None:
        """Holds the C feed in `_fast_feed` while a chunk can go straight to it, else None."""
        plain = self._plain and not self._high_surrogate and self._failed is None
        self._fast_feed = self._feed if plain else None

    def _note_failure(self, error: BaseException) -> None:
        """Keeps why the encoder failed (the first error): every later call says it."""
        self._fast_feed = None
        if self._failed is None:
            first_line = str(error).splitlines()[0] if str(error) else ""
            self._failed = f"{type(error).__name__}: {first_line}"

    def _error(self) -> BaseException:
        """The exception for the stream's failure (its first, then "failed earlier")."""
        if self._failed is not None:
            return ValueError(
                f"this stream encoder failed earlier ({self._failed}); start a new one with enc.stream_encoder()"
            )
        info = self._stream.info()
        status = info["status"]
        if status == STATUS_INVALID_UTF8:
            error: BaseException = InvalidUTF8Error(info["offset"], info["byte"], UTF8_REASONS.get(info["reason"], "invalid"))
        elif status == STATUS_REFUSED_SPECIAL and self._refusal is not None:
            token = self._refusal.texts[info["special_string"]]
            try:
                raise_disallowed_special_token(token)
            except ValueError as refused:
                error = refused
        elif status == STATUS_NOMEM:
            error = MemoryError(f"stream encoding failed: {status_message(status)}")
        else:
            error = ValueError(f"stream encoding failed: {status_message(status)}")
        return error


# feed's work is mostly one call, `self._fast_feed(chunk)`, made from C: no Python frame per
# chunk, where the C functions are built (_native.held_method); the method itself otherwise.
StreamEncoder.feed = held_method(StreamEncoder.feed, "_fast_feed", "_note_failure")  # type: ignore[method-assign]


class _HeldStretches:
    """Stretches of a custom pattern (split by `regex`), each held until it ends and then
    encoded by `encode`: exact, not eager.  The special tokens are found in C as the stream
    finds them; the bytes are checked as UTF-8 by Python's incremental decoder."""

    def __init__(self, core: CoreBPE, allowed: frozenset[str], refused: frozenset[str]):
        self._core = core
        self._allowed = core._matcher(allowed)
        prepared = refusal(refused)
        self._refused = prepared.matcher if prepared is not None else None
        self._refused_texts = prepared.texts if prepared is not None else ()
        self._text = bytearray()  # the stretch under way and what may start a special
        self._validator = codecs.getincrementaldecoder("utf-8")("strict")
        self._status = 0
        self._error = (0, 0, 0, 0)  # reason, offset, byte, special string
        self._counts = {"bytes_fed": 0, "tokens_emitted": 0, "max_pending_bytes": 0}
        self._lock = threading.Lock()

    def feed(self, chunk: Chunk, is_utf8: bool = False) -> Optional[List[int]]:
        if isinstance(chunk, str):
            try:
                data = chunk.encode("utf-8")
            except UnicodeEncodeError:
                return None
        elif isinstance(chunk, (bytes, bytearray, memoryview)):
            data = bytes(chunk)
        else:
            raise TypeError(f"feed() takes str or bytes, not {type(chunk).__name__}")
        return self._take(data, final=False, check=not (is_utf8 or isinstance(chunk, str)))

    def finish(self) -> Optional[List[int]]:
        return self._take(b"", final=True, check=True)

    def _take(self, data: bytes, final: bool, check: bool) -> Optional[List[int]]:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("this stream encoder is in use by another thread: a stream encoder is for one "
                               "thread at a time (make one per thread with enc.stream_encoder())")
        try:
            if self._status:
                return None
            if check or final:
                fed = self._counts["bytes_fed"]
                before = self._validator.getstate()[0]
                try:
                    self._validator.decode(data, final)
                except UnicodeDecodeError as error:
                    window = before + data
                    byte = window[error.start] if error.start < len(window) else 0
                    reason = {"invalid start byte": 1, "invalid continuation byte": 2}.get(error.reason, 3)
                    self._fail(STATUS_INVALID_UTF8, (reason, fed - len(before) + error.start, byte, 0))
                    return None
            self._counts["bytes_fed"] += len(data)
            self._text += data
            ids = self._cut(final)
            if ids is None:
                return None
            if final:
                self._text.clear()
                self._validator.reset()
            self._counts["tokens_emitted"] += len(ids)
            self._counts["max_pending_bytes"] = max(self._counts["max_pending_bytes"], len(self._text))
            return ids
        finally:
            self._lock.release()

    def _fail(self, status: int, error: tuple[int, int, int, int]) -> None:
        self._status, self._error = status, error

    def _cut(self, final: bool) -> Optional[List[int]]:
        """Encodes the stretches that ended (at a certain allowed special, or at the end)."""
        text = bytes(self._text)
        if self._refused is not None:
            hit = self._refused.find(text)
            open_start = len(text) if final else self._refused.open_start(text)
            if hit is not None and hit[0] < open_start:
                self._fail(STATUS_REFUSED_SPECIAL, (0, hit[0], 0, hit[1]))
                return None
        ids: List[int] = []
        start = 0
        while self._allowed is not None:
            hit = self._allowed.find(text, start)
            open_start = len(text) if final else self._allowed.open_start(text, start)
            if hit is None or hit[0] >= open_start:
                break
            position, index = hit
            ids += self._core._ordinary(text[start:position].decode("utf-8"))
            ids.append(self._allowed.ids[index])
            start = position + len(self._allowed.strings[index])
        if final:
            ids += self._core._ordinary(text[start:].decode("utf-8"))
            start = len(text)
        del self._text[:start]
        return ids

    def info(self) -> Dict[str, int]:
        reason, offset, byte, special = self._error
        return {"status": self._status, "reason": reason, "offset": offset, "byte": byte,
                "special_string": special, **self.stats()}

    def stats(self) -> Dict[str, int]:
        return {**self._counts, "pending_bytes": len(self._text), "live_ends": 0}


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

    def __init__(self, decode_bytes: Callable[[Sequence[int]], bytes], errors: str = "replace"):
        codecs.lookup_error(errors)  # LookupError now, not at the first feed
        self._decode_bytes = decode_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)
        self._lock = threading.Lock()  # one thread at a time: the decoder's state is not shared safely
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
        with self._one_thread():
            return self._decoder.decode(self._decode_bytes(tokens))

    def finish(self) -> str:
        """Returns the rest (an unfinished character is an error, as in `decode`); resets."""
        with self._one_thread():
            try:
                return self._decoder.decode(b"", True)
            finally:
                self._decoder.reset()

    def _one_thread(self) -> "_Held":
        """The decoder for this call; RuntimeError if another thread's call has it."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("this stream decoder is in use by another thread: a stream decoder is for one "
                               "thread at a time (make one per thread with enc.stream_decoder())")
        return _Held(self._lock)


class _Held:
    """Releases a lock taken with acquire(blocking=False) at the end of a `with`."""

    __slots__ = ("_lock",)

    def __init__(self, lock: threading.Lock):
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
