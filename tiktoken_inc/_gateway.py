"""Bounded counting, truncation and capped encoding, for services that must reject or cut
prompts in bounded time on any input.

Everything here stops reading the text as soon as the answer is known: once more than the
limit of ids are certain (the C stream emits an id only when no continuation can change
it), the rest of the text is never looked at, not even converted to UTF-8.  Special tokens
are found in bounded windows for the same reason.

```
>>> import tiktoken_inc
>>> enc = tiktoken_inc.get_encoding("cl100k_base")
>>> enc.count_tokens("hello world")
2
>>> enc.count_tokens("a " * 10**8, limit=1000) is None   # returns at once
True
>>> enc.truncate("hello world, and more", 2)
([15339, 1917], 'hello world')
```
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, AbstractSet, Collection, Iterator, Literal, Optional, Tuple

from tiktoken_inc._native import NativeStream, utf8_replacing_surrogates

if TYPE_CHECKING:
    from tiktoken_inc.core import Encoding

#: Characters converted and fed to the C stream at a time.
_CHUNK = 1 << 20
#: Texts of at most this many characters, and at most _ONE_SHOT_PER_ID per allowed id,
#: are encoded in one call (bounded memory, and little more work than a stream that stops).
_ONE_SHOT_CHARS = 1 << 20
_ONE_SHOT_PER_ID = 8


class TokenLimitError(ValueError):
    """The text encodes to more tokens than allowed.

    `limit` is the cap that was passed; `count` is at least limit + 1 (the ids that were
    certain when encoding stopped).
    """

    def __reduce__(self) -> tuple:
        return (type(self), (self.limit,))  # picklable: crosses process pools

    def __init__(self, limit: int):
        self.limit = limit
        self.count = limit + 1
        super().__init__(
            f"the text encodes to more than {limit} tokens (max_tokens={limit}); "
            "shorten it, raise max_tokens, or keep the first tokens with enc.truncate(text, max_tokens)"
        )


def _check_limit(limit: object, name: str) -> Optional[int]:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"{name} must be a non-negative integer or None, got {limit!r}")
    return limit


def _utf8(text: str) -> bytes:
    """UTF-8 of `text`, lone surrogates replaced as tiktoken does."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return utf8_replacing_surrogates(text)


def _chunks(text: str, start: int, end: int) -> Iterator[str]:
    """text[start:end] in pieces of about _CHUNK characters, never splitting a surrogate pair."""
    while start < end:
        stop = min(start + _CHUNK, end)
        if stop < end and "\ud800" <= text[stop - 1] <= "\udbff":
            stop += 1
        yield text[start:stop]
        start = stop


def _events(
    enc: Encoding, text: str, allowed: AbstractSet[str], disallowed: AbstractSet[str]
) -> Iterator[Tuple[int, int, Optional[int]]]:
    """The text as (start, end, None) stretches free of specials, and (at, at, id) for each
    allowed special token (which ends a segment, as in `Encoding.encode`).

    Specials are searched in windows that grow geometrically and stretches are yielded as
    soon as they are known to hold none, so a caller that stops early has looked at about as
    much text as it consumed.  A disallowed special raises the same ValueError as
    `Encoding.encode` when the scan reaches it.
    """
    from tiktoken_inc.core import raise_disallowed_special_token, special_token_regex

    specials = frozenset(allowed) | frozenset(disallowed)
    if not specials:
        yield 0, len(text), None
        return
    pattern = special_token_regex(specials)
    keep = max(map(len, specials)) - 1  # a special may straddle a window's end
    start = 0
    window = 1 << 16
    while start < len(text):
        stop = min(len(text), start + window)
        match = pattern.search(text, start, stop)
        if match is None:
            if stop == len(text):
                yield start, stop, None
                return
            safe = max(start, stop - keep)
            if safe > start and "\ud800" <= text[safe - 1] <= "\udbff":
                safe -= 1  # never split a surrogate pair between two stretches
            yield start, safe, None
            start = safe
            window *= 2
            continue
        token = match.group()
        if token not in allowed:
            raise_disallowed_special_token(token)
        yield start, match.start(), None
        yield match.start(), match.end(), enc._special_tokens[token]
        start = match.end()
        window = 1 << 16


def _stream_pattern(enc: Encoding) -> Optional[int]:
    """The C stream's pattern for this encoding: a TKI_PATTERN_*, 0 (no pre-split), or None
    (a custom regex, split in Python)."""
    core = enc._core_bpe
    if not getattr(core, "pretokenize", True):
        return 0
    return core._pattern


class _Collector:
    """Counts ids (and keeps the first cap + 1 of them when asked) until the cap is passed."""

    def __init__(self, cap: Optional[int], want_ids: bool):
        self.cap = cap
        self.want_ids = want_ids
        self.ids: list[int] = []
        self.count = 0

    def take(self, new: list[int]) -> bool:
        """Adds `new`; True once more than `cap` ids have been seen (the caller stops)."""
        if self.want_ids:
            self.ids.extend(new if self.cap is None else new[: self.cap + 1 - self.count])
        self.count += len(new)
        return self.cap is not None and self.count > self.cap

    def result(self) -> Tuple[list[int], int, bool]:
        exceeded = self.cap is not None and self.count > self.cap
        return self.ids, self.cap + 1 if exceeded else self.count, exceeded


def _bounded_ids(
    enc: Encoding,
    text: str,
    cap: Optional[int],
    allowed_special: Literal["all"] | AbstractSet[str],
    disallowed_special: Literal["all"] | Collection[str],
    want_ids: bool,
) -> Tuple[list[int], int, bool]:
    """The first ids of encode(text) (all, or cap + 1 of them), their count, and whether the
    text encodes to more than `cap` ids."""
    if len(text) <= _ONE_SHOT_CHARS and (cap is None or len(text) <= _ONE_SHOT_PER_ID * (cap + 1)):
        # Short enough that encoding it all costs about what the stream would read anyway:
        # the one-shot encoder is several times faster per byte than the eager stream.  The
        # arguments go as given: encode's default call is its fastest.
        ids = enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        exceeded = cap is not None and len(ids) > cap
        count = cap + 1 if exceeded else len(ids)
        return (ids[: count] if want_ids else []), count, exceeded
    allowed, disallowed = _special_sets(enc, allowed_special, disallowed_special)
    collector = _Collector(cap, want_ids)
    pattern = _stream_pattern(enc)
    if pattern is None:
        _collect_regex(enc, text, allowed, disallowed, collector)
        return collector.result()
    stream = NativeStream(enc._core_bpe._vocab, pattern)
    for start, end, special in _events(enc, text, allowed, disallowed):
        if special is None:
            for chunk in _chunks(text, start, end):
                if collector.take(stream.feed(_utf8(chunk))):
                    return collector.result()
        elif collector.take(stream.finish()) or collector.take([special]):
            return collector.result()
    collector.take(stream.finish())
    return collector.result()


def _collect_regex(
    enc: Encoding, text: str, allowed: AbstractSet[str], disallowed: AbstractSet[str], collector: _Collector
) -> None:
    """_bounded_ids for a custom pattern: each segment split lazily with `regex`.

    A segment must be whole before it is split (lookaheads see its end), so here the scan
    for specials and the split are not bounded by the cap; the encoding is.
    """
    core = enc._core_bpe
    segment_start = 0
    boundaries = itertools.chain(_events(enc, text, allowed, disallowed), [(len(text), len(text), -1)])
    for start, end, special in boundaries:
        if special is None:
            continue
        pieces = iter(core._find(text[segment_start:start]))  # tiktoken's split, exactly
        for batch in iter(lambda: list(itertools.islice(pieces, 256)), []):
            if collector.take(core._vocab.encode_pieces(map(_utf8, batch))):
                return
        if special >= 0 and collector.take([special]):
            return
        segment_start = end


def _special_sets(
    enc: Encoding,
    allowed_special: Literal["all"] | AbstractSet[str],
    disallowed_special: Literal["all"] | Collection[str],
) -> Tuple[AbstractSet[str], AbstractSet[str]]:
    """tiktoken's resolution of the two special-token arguments."""
    if allowed_special == "all":
        allowed_special = enc.special_tokens_set
    if disallowed_special == "all":
        disallowed_special = enc.special_tokens_set - allowed_special
    # An allowed string that is no special token of this encoding is ordinary text, as in encode.
    return frozenset(allowed_special) & enc.special_tokens_set, frozenset(disallowed_special)


def count_tokens(
    enc: Encoding,
    text: str,
    *,
    limit: Optional[int] = None,
    allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
    disallowed_special: Literal["all"] | Collection[str] = "all",
) -> Optional[int]:
    """len(enc.encode(text, ...)) without building the list; None once it exceeds `limit`."""
    if not isinstance(text, str):
        raise TypeError(f"count_tokens expects a str, got {type(text).__name__}")
    cap = _check_limit(limit, "limit")
    _, count, exceeded = _bounded_ids(enc, text, cap, allowed_special, disallowed_special, want_ids=False)
    return None if exceeded else count


def encode_capped(
    enc: Encoding,
    text: str,
    max_tokens: int,
    allowed_special: Literal["all"] | AbstractSet[str],
    disallowed_special: Literal["all"] | Collection[str],
) -> list[int]:
    """enc.encode(text), or TokenLimitError as soon as more than max_tokens ids are certain."""
    cap = _check_limit(max_tokens, "max_tokens")
    ids, _, exceeded = _bounded_ids(enc, text, cap, allowed_special, disallowed_special, want_ids=True)
    if exceeded:
        raise TokenLimitError(max_tokens)
    return ids


def truncate(
    enc: Encoding,
    text: str,
    max_tokens: int,
    *,
    allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
    disallowed_special: Literal["all"] | Collection[str] = "all",
) -> Tuple[list[int], str]:
    """The longest prefix of `text` (on a character boundary) whose encoding has at most
    max_tokens ids and is a prefix of the encoding of `text`; (its ids, the prefix)."""
    if not isinstance(text, str):
        raise TypeError(f"truncate expects a str, got {type(text).__name__}")
    cap = _check_limit(max_tokens, "max_tokens")
    ids, _, exceeded = _bounded_ids(enc, text, cap, allowed_special, disallowed_special, want_ids=True)
    if not exceeded:
        return ids, text
    allowed, _ = _special_sets(enc, allowed_special, disallowed_special)
    # Candidates: k tokens (k <= cap, largest first) whose bytes end on a character boundary
    # (an O(1) test: the next byte is no continuation byte), then checked by re-encoding.
    data = enc.decode_bytes(ids)
    ends = list(itertools.accumulate(len(enc.decode_single_token_bytes(t)) for t in ids))
    attempts = 0
    for keep in range(cap, 0, -1):
        end = ends[keep - 1]
        if end < len(data) and 0x80 <= data[end] < 0xC0:
            continue  # the k-th token ends inside a character
        prefix = _text_prefix(text, data[:end])
        if enc.encode(prefix, allowed_special=allowed, disallowed_special=()) == ids[:keep]:
            return ids[:keep], prefix
        attempts += 1
        if attempts == _TRUNCATE_ATTEMPTS:
            break  # bounded work; a shorter, certainly consistent prefix follows
    return _truncate_at_piece_boundary(enc, text, ids, ends, data, allowed)


#: Re-encodings truncate tries before it falls back to cutting between regex pieces.
_TRUNCATE_ATTEMPTS = 8


def _text_prefix(text: str, utf8_prefix: bytes) -> str:
    """The prefix of `text` whose UTF-8 (lone surrogates replaced) is `utf8_prefix`."""
    decoded = utf8_prefix.decode("utf-8")
    if text.startswith(decoded):
        return decoded
    # The text holds surrogates: walk it, a surrogate pair being one decoded character.
    index = characters = 0
    while characters < len(decoded) and index < len(text):
        pair = "\ud800" <= text[index] <= "\udbff" and index + 1 < len(text) and "\udc00" <= text[index + 1] <= "\udfff"
        index += 2 if pair else 1
        characters += 1
    return text[:index]


def _truncate_at_piece_boundary(
    enc: Encoding, text: str, ids: list[int], ends: list[int], data: bytes, allowed: AbstractSet[str]
) -> Tuple[list[int], str]:
    """The fallback of truncate: the longest k whose end is followed by whitespace in the
    text and whose prefix re-encodes to the first k ids (a few tries, then nothing)."""
    attempts = 0
    for keep in range(len(ids) - 1, 0, -1):
        end = ends[keep - 1]
        if end >= len(data) or data[end] not in b" \t\n\r":
            continue
        prefix = _text_prefix(text, data[:end])
        if enc.encode(prefix, allowed_special=allowed, disallowed_special=()) == ids[:keep]:
            return ids[:keep], prefix
        attempts += 1
        if attempts == _TRUNCATE_ATTEMPTS:
            break
    return [], ""
