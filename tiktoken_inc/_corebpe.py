"""CoreBPE: tiktoken's Rust `CoreBPE`, as Python sees it, over the C core.

Special tokens are cut out as tiktoken does, found in C by a matcher built once per allowed
set (`SpecialMatcher`, cached here).  Each stretch between them is split into pieces -- in C
for tiktoken's own patterns (registered in `_native.PATTERN_IDS`) and for any other pattern
the compiler of `_pattern` takes (`CompiledPattern`), with the `regex` package and the exact
pattern otherwise -- and every piece is encoded in C with the whole-piece shortcut (a piece
that is itself a token is that token), else BPE.  With a built-in pattern (or none), a whole
`encode` is one C call; with a compiled one, one C call per stretch.

```
>>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
>>> bpe = CoreBPE(ranks, {"<|end|>": 257}, r"\\S+|\\s+")
>>> bpe.encode("abab <|end|>", {"<|end|>"})
[256, 256, 32, 257]
```
Real use goes through `tiktoken_inc.Encoding`.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import operator
import threading
from array import array
from typing import TYPE_CHECKING, Any, AbstractSet, Callable, Iterator, List, Mapping, NamedTuple, NoReturn, Optional, Sequence, Tuple

from tiktoken_inc._cache import cached_vocab, ranks_key
from tiktoken_inc._native import (
    PATTERN_CL100K,
    PATTERN_IDS,
    PATTERN_O200K,
    PATTERN_R50K,
    CompiledPattern,
    NativeStream,
    NativeVocab,
    SpecialMatcher,
    raise_for_status,
    utf8_replacing_surrogates,
)
from tiktoken_inc._pattern import UnsupportedPattern, compile_body, same_split
from tiktoken_inc._pattern import compile_pattern as compile_program
from tiktoken_inc._unicode_compat import (
    RECLASSIFIED_IN_TIKTOKEN,
    SYMBOLS_UNASSIGNED_IN_TIKTOKEN,
    UNASSIGNED_IN_TIKTOKEN,
)

if TYPE_CHECKING:
    import regex
else:

    class _RegexOnFirstUse:
        """Stands for the `regex` module until an attribute is asked for, then imports it
        (into this module's globals): importing `regex` is a third of `import tiktoken_inc`,
        and tiktoken's own patterns are split in C."""

        def __getattr__(self, name: str) -> Any:
            import regex as module

            globals()["regex"] = module
            return getattr(module, name)

    regex = _RegexOnFirstUse()


class _PatternOnFirstUse:
    """A pattern compiled when first used: for the patterns split in C (tiktoken's own, known
    to compile, and those `_pattern` compiles, translated by `compile_pattern`), so that an
    Encoding does not compile for `regex` what it may never use."""

    def __init__(self, pat_str: str, compile: Callable[[str], Any] = lambda pat_str: regex.compile(pat_str)):
        self._pat_str = pat_str
        self._compile = compile
        self._compiled: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = self._compile(self._pat_str)
        return getattr(self._compiled, name)

# Rust's `char::is_whitespace` (the Unicode White_Space property), which tiktoken uses to
# decide whether the last character of the unstable bytes may split off.
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


#: Texts this long are split with the GIL released (shorter ones: not worth the overhead).
_RELEASE_GIL_FROM = 2048

#: Distinct allowed-special sets whose matchers a CoreBPE keeps (then it starts over).
_MATCHER_CACHE_SIZE = 64

#: Regex pieces packed for the C core: their UTF-8 laid end to end, and each piece's end.
Split = Tuple[bytes, List[int]]
#: A stretch of text between allowed special tokens, and the id of the special token that
#: ends it (None for the last one).
Segment = Tuple[str, Optional[int]]


# tiktoken's Rust regex uses older Unicode tables than the `regex` package; the code points
# where the built-in patterns' classes differ are listed in _unicode_compat.  Before a
# Python-side split, each one the installed `regex` package classifies differently is
# replaced by a stand-in that it classifies the way tiktoken classifies the original -- one
# character for one, so the pieces are cut from the original text.
_UNASSIGNED_STAND_IN = "\ufdd0"  # a noncharacter: never assigned, in any Unicode version
_PROBES = (r"\p{L}", r"\p{Lu}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{Ll}", r"\p{M}", r"\p{N}", r"\s", r"\p{Cn}")


class _StandIns(NamedTuple):
    table: dict[int, str]  # for str.translate
    chars: frozenset[str]  # the characters the table replaces


@functools.lru_cache(maxsize=None)
def _stand_ins() -> _StandIns | None:
    """The code points the installed `regex` package classifies unlike tiktoken, or None."""
    unassigned = UNASSIGNED_IN_TIKTOKEN + SYMBOLS_UNASSIGNED_IN_TIKTOKEN
    wanted = {cp: _UNASSIGNED_STAND_IN for first, last in unassigned for cp in range(first, last + 1)}
    wanted.update(RECLASSIFIED_IN_TIKTOKEN)
    chars = "".join(map(chr, wanted)) + "".join(set(wanted.values()))
    members = [set(regex.findall(probe, chars)) for probe in _PROBES]

    def classes(char: str) -> tuple[bool, ...]:
        return tuple(char in member for member in members)

    table = {cp: stand_in for cp, stand_in in wanted.items() if classes(chr(cp)) != classes(stand_in)}
    if not table:
        return None
    return _StandIns(table, frozenset(map(chr, table)))


def check_with_tiktoken(pat_str: str) -> None:
    """Raises the ValueError tiktoken.Encoding raises for a pattern its engine rejects."""
    try:  # tiktoken's own constructor: its error for what its engine rejects
        from tiktoken._tiktoken import CoreBPE as TiktokenCoreBPE
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return
    TiktokenCoreBPE({}, {}, pat_str)  # raises ValueError as tiktoken.Encoding does


def compile_pattern(pat_str: str) -> "regex.Pattern[str]":
    """`pat_str` compiled for the `regex` package so that it matches as tiktoken's regex
    engine matches it (`_regex_syntax`); ValueError with tiktoken's own message for a pattern
    tiktoken rejects, and for one that cannot be split exactly as tiktoken splits it.

    ```
    >>> compile_pattern(r"[\\p{L}&&[^\\p{Han}]]+|\\S").findall("ab你")
    ['ab', '你']
    ```
    """
    from tiktoken_inc._regex_syntax import to_regex

    check_with_tiktoken(pat_str)
    translated = to_regex(pat_str)
    try:
        return regex.compile(translated)
    except regex.error as error:
        raise ValueError(f"pat_str {pat_str!r} cannot be split here exactly as tiktoken splits it: {error}") from None


def _engine_matches(pattern: "regex.Pattern[str]", text: str) -> Iterator[tuple[int, int]]:
    """The spans of the matches of `pattern` in `text` in the order tiktoken's engine
    (fancy-regex) finds them: after an empty match the search goes on from the next
    character, and an empty match right where the previous match ended is skipped (the
    `regex` package instead looks again there for a longer match).

    ```
    >>> list(_engine_matches(regex.compile(r"\\B|."), "ab"))
    [(0, 1)]
    ```
    """
    position, last_end = 0, -1
    while position <= len(text):
        match = pattern.search(text, position)
        if match is None:
            return
        start, end = match.span()
        position = end + 1 if start == end else end
        if start == end == last_end:
            continue
        last_end = end
        yield start, end


#: The names `CoreBPE.pretokenizer` gives tiktoken's own patterns.
_BUILTIN_NAMES = {PATTERN_R50K: "builtin:r50k", PATTERN_CL100K: "builtin:cl100k", PATTERN_O200K: "builtin:o200k"}


@functools.lru_cache(maxsize=64)
def _compiled_pattern(pat_str: str) -> CompiledPattern | str:
    """The C splitter for `pat_str`, or why there is none (the pattern is split by `regex`).
    A pattern that splits as one of tiktoken's own does but for the piece that reaches the end
    of the text (Llama 3's is cl100k_base's without `\\s++$`) borrows that one's hand-written
    splitter, several times faster than the compiled automaton, for the rest."""
    try:
        program = compile_program(pat_str)
    except UnsupportedPattern as error:
        return str(error)
    compiled = CompiledPattern(program)
    for builtin_pat_str, pattern in PATTERN_IDS.items():
        if same_split(program, compile_body(builtin_pat_str)):
            compiled.use_builtin(pattern)
            break
    return compiled


@functools.lru_cache(maxsize=128)
def special_token_regex(tokens: frozenset[str]) -> regex.Pattern[str]:
    """A regex matching any of `tokens` literally, the longest first at a given position
    (what `SpecialMatcher` finds in C; the streaming and capped encoders search with this).

    ```
    >>> special_token_regex(frozenset({"<|a|>", "<|ab|>"})).search("x<|ab|>").group()
    '<|ab|>'
    ```
    """
    ordered = sorted(tokens, key=lambda token: (-len(token), token))
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def raise_disallowed_special_token(token: str) -> NoReturn:
    """Raises tiktoken's ValueError for text matching a disallowed special token."""
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )


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


#: The largest limit the C calls are given: no text can pass it (an id covers a byte at
#: least), so a larger one (10**30, say) means the same and is cut to it.
LARGEST_LIMIT = 2**62


def check_limit(limit: object, name: str) -> Optional[int]:
    """`limit` if it is None or a non-negative int (at most LARGEST_LIMIT: a larger one is
    cut to it), else ValueError naming the argument."""
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"{name} must be a non-negative integer or None, got {limit!r}")
    return min(limit, LARGEST_LIMIT)


class Refusal(NamedTuple):
    """A set of special tokens to refuse, ready for the C search."""

    matcher: SpecialMatcher | None  # the non-empty strings (None: there are none)
    texts: tuple[str, ...]  # by the matcher's string index
    has_empty: bool  # "" is among them: it matches at the start of every text
    #: The first character of every string when they all share one (special tokens: "<"),
    #: else "": a text without it holds none of them, which `in` tells faster than a C call.
    first_char: str


@functools.lru_cache(maxsize=128)
def refusal(tokens: frozenset[str]) -> Refusal | None:
    """`tokens` prepared for the C search (their UTF-8 with surrogates passed), or None if
    some token is not a str."""
    if not all(isinstance(token, str) for token in tokens):
        return None
    texts = tuple(sorted(token for token in tokens if token))
    # surrogatepass: the search is in the text's code points, lone surrogates included.
    matcher = SpecialMatcher([text.encode("utf-8", "surrogatepass") for text in texts]) if texts else None
    first_chars = {text[0] for text in texts}
    return Refusal(matcher, texts, "" in tokens, first_chars.pop() if len(first_chars) == 1 else "")


def first_special_in(tokens: frozenset[str], text: str) -> str | None:
    """The first of `tokens` found in `text` -- the leftmost, the longest where several start
    there -- or None: the token tiktoken's error names (tiktoken searches with a regex
    alternation, whose order at a shared start is a set's iteration order).

    ```
    >>> first_special_in(frozenset({"<|a|>", "<|a|>b", "b"}), "xb<|a|>b")
    'b'
    >>> first_special_in(frozenset({"<|a|>", "<|a|>b"}), "x<|a|>b")
    '<|a|>b'
    ```
    """
    refused = refusal(tokens) if isinstance(text, str) else None
    if refused is None:  # a token or the text is not a str: tiktoken's regex raises as tiktoken does
        match = special_token_regex(tokens).search(text)
        return match.group() if match else None
    hit = None
    if refused.matcher is not None and (not refused.first_char or refused.first_char in text):
        hit = refused.matcher.find(text.encode("utf-8", "surrogatepass"))
    if refused.has_empty and (hit is None or hit[0] > 0):
        return ""
    return refused.texts[hit[1]] if hit is not None else None


# ---------------------------------------------------------------- argument checks
# These mirror the conversions tiktoken's extension performs, messages included.


def _require_str(text: object) -> str:
    """`text` itself if it is a str, else TypeError like tiktoken's."""
    if not isinstance(text, str):
        raise TypeError(f"'{type(text).__name__}' object is not an instance of 'str'")
    return text


def _require_bytes(data: object) -> bytes:
    """`data` itself if it is bytes, else TypeError like tiktoken's."""
    if not isinstance(data, bytes):
        raise TypeError(f"'{type(data).__name__}' object is not an instance of 'bytes'")
    return data


def _require_set(allowed_special: object) -> AbstractSet[str]:
    """`allowed_special` if it is a set (or frozenset) of str, else TypeError like tiktoken's."""
    if allowed_special is None:
        raise TypeError("'None' is not an instance of 'set'")
    if not isinstance(allowed_special, (set, frozenset)):
        raise TypeError(f"'{type(allowed_special).__name__}' object is not an instance of 'set'")
    for item in allowed_special:
        _require_str(item)
    return allowed_special


def _require_text_and_set(text: object, allowed_special: object) -> None:
    """tiktoken's checks of (text, allowed_special), in its order: TypeError for a text that
    is no str, UnicodeEncodeError for one with lone surrogates, then TypeError for an
    allowed set that is no set of str.  The text is looked at only when the set is wrong."""
    if isinstance(allowed_special, (set, frozenset)):
        return
    _require_str(text).encode("utf-8")  # type: ignore[union-attr]
    _require_set(allowed_special)


def _token_id(token: object) -> int:
    """`token` as an id in [0, 2**32), with tiktoken's TypeError / OverflowError otherwise."""
    value = operator.index(token)  # type: ignore[arg-type]
    if not 0 <= value < 2**32:
        raise OverflowError("out of range integral type conversion attempted")
    return value


def _as_list(tokens: object) -> list:
    """`tokens` as a list, cheaply (elements unchecked); TypeError like tiktoken's if impossible."""
    if type(tokens) is list:
        return tokens
    if type(tokens) is tuple:
        return list(tokens)
    if getattr(getattr(tokens, "dtype", None), "kind", None) in ("i", "u", "b"):  # numpy
        values = tokens.tolist()  # type: ignore[attr-defined]
        if isinstance(values, list):
            return values
    return _token_list(tokens)


def _token_list(tokens: object) -> list[int]:
    """`tokens` as a list of ids, converted and checked element by element as tiktoken does."""
    if tokens is None:
        raise TypeError("'None' is not an instance of 'Sequence'")
    if isinstance(tokens, str):
        raise TypeError("Can't extract `str` to `Vec`")
    if not (hasattr(tokens, "__len__") and hasattr(tokens, "__getitem__")) or isinstance(tokens, dict):
        raise TypeError(f"'{type(tokens).__name__}' object is not an instance of 'Sequence'")
    return [_token_id(token) for token in tokens]  # type: ignore[attr-defined]


def _one_text_per_rank(special_tokens: dict[str, int]) -> dict[str, int]:
    """The special tokens minus later texts that reuse an earlier one's id (decode is unique).

    o200k_harmony gives id 200018 to both `<|endofprompt|>` and `<|reserved_200018|>`; both
    encode to it, and like tiktoken it decodes as the first, `<|endofprompt|>`.

    ```
    >>> _one_text_per_rank({"<|a|>": 5, "<|b|>": 5, "<|c|>": 6})
    {'<|a|>': 5, '<|c|>': 6}
    ```
    """
    first: dict[int, str] = {}
    for text, rank in special_tokens.items():
        first.setdefault(rank, text)
    if len(first) == len(special_tokens):
        return special_tokens
    return {text: rank for rank, text in first.items()}


def _prefix_range(sorted_tokens: list[bytes], prefix: bytes) -> tuple[int, int]:
    """The slice of `sorted_tokens` holding exactly the tokens that start with `prefix`.

    ```
    >>> _prefix_range([b"a", b"ab", b"abc", b"b"], b"ab")
    (1, 3)
    ```
    """
    first = bisect.bisect_left(sorted_tokens, prefix)
    stem = prefix.rstrip(b"\xff")
    if not stem:
        return first, len(sorted_tokens)
    above = stem[:-1] + bytes([stem[-1] + 1])  # the least bytes after every extension of prefix
    return first, bisect.bisect_left(sorted_tokens, above, first)


def _last_char(data: bytes) -> tuple[str | None, int]:
    """The last UTF-8 character of `data` and its size, or (None, 1) if it is not valid.

    ```
    >>> _last_char("a\\u3000".encode())
    ('\\u3000', 3)
    >>> _last_char(b"a\\xe3")
    (None, 1)
    ```
    """
    start = len(data) - 1
    limit = max(len(data) - 4, 0)
    while start > limit and data[start] & 0xC0 == 0x80:
        start -= 1
    try:
        return data[start:].decode("utf-8"), len(data) - start
    except UnicodeDecodeError:
        return None, 1


def _text_prefix(text: str, utf8_prefix: bytes) -> str | None:
    """The prefix of `text` whose UTF-8 (lone surrogates replaced as tiktoken does) is
    `utf8_prefix`, or None if it ends inside a character.

    ```
    >>> _text_prefix("a\\ud83d\\ude00b", "a\\U0001f600".encode())
    'a\\ud83d\\ude00'
    ```
    """
    try:
        decoded = utf8_prefix.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith(decoded):
        return decoded
    # The text holds surrogates: walk it, a surrogate pair being one decoded character.
    index = characters = 0
    while characters < len(decoded) and index < len(text):
        pair = "\ud800" <= text[index] <= "\udbff" and index + 1 < len(text) and "\udc00" <= text[index + 1] <= "\udfff"
        index += 2 if pair else 1
        characters += 1
    return text[:index]


class CoreBPE:
    """Byte pair encoding with tiktoken's semantics: regex split, specials, BPE per piece.

    `mergeable_ranks` maps token bytes to ids, `special_tokens` maps special token text to
    ids, `pat_str` is the pre-split pattern, or None for no pre-split: the text between
    special tokens is then one piece (tiktoken's `_encode_single_piece` on each stretch).
    Raises ValueError for a pattern the `regex` package rejects or a vocabulary the C core
    cannot use.

    ```
    >>> import tiktoken_inc
    >>> bpe = tiktoken_inc.get_encoding("gpt2")._core_bpe
    >>> bpe.encode_ordinary("hello world")
    [31373, 995]
    ```
    """

    @staticmethod
    def build_vocab(mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int]) -> NativeVocab:
        """The C tables for these tokens: from the on-disk cache for a vocabulary large
        enough to be worth it (`_cache.ranks_key`), else built."""
        specials = _one_text_per_rank(special_tokens)
        key = ranks_key(mergeable_ranks)
        if key is None:
            return NativeVocab(mergeable_ranks, specials)
        return cached_vocab(
            key, specials, lambda: NativeVocab(mergeable_ranks, specials), mergeable_ranks.get(b"")
        )

    def __init__(
        self,
        mergeable_ranks: Mapping[bytes, int],
        special_tokens: dict[str, int],
        pat_str: Optional[str],
        *,
        vocab: NativeVocab | None = None,
    ):
        #: The C splitter of a custom pattern, or None (a built-in pattern, `regex`, or none).
        self._compiled: CompiledPattern | None = None
        #: Why a custom pattern is split by `regex` (None otherwise).
        self._regex_reason: str | None = None
        if pat_str is not None and pat_str not in PATTERN_IDS:
            check_with_tiktoken(pat_str)
            compiled = _compiled_pattern(pat_str)
            if isinstance(compiled, str):
                self._regex_reason = compiled
            else:
                self._compiled = compiled
        #: The compiled pattern, or None: no pre-split (each stretch is one piece).
        self._regex: Optional[regex.Pattern[str]] = None
        if pat_str is not None and pat_str in PATTERN_IDS:
            self._regex = _PatternOnFirstUse(pat_str)  # type: ignore[assignment]
        elif pat_str is not None and self._compiled is not None:
            self._regex = _PatternOnFirstUse(pat_str, compile_pattern)  # type: ignore[assignment]
        elif pat_str is not None:
            self._regex = compile_pattern(pat_str)
        self._vocab = vocab if vocab is not None else self.build_vocab(mergeable_ranks, special_tokens)
        #: The C pre-splitter for this pattern (one of tiktoken's), or None: `regex` splits
        #: (or nothing does, without a pattern).
        self._pattern: int | None = PATTERN_IDS.get(pat_str) if pat_str is not None else None
        #: encode_ordinary of a str (or UTF-8 bytes) in one lean C call, when C splits; else None.
        self._encode_str = self._vocab.text_encoder(self._pattern) if self._pattern is not None else None
        compiled_encoders = self._vocab.compiled_encoders(self._compiled) if self._compiled is not None else None
        if compiled_encoders is not None:
            self._encode_str = compiled_encoders[0]
        #: decode_bytes and decode (errors replaced) of a list of ints in one C call, each
        #: None for what it does not take (decode_bytes then says why); or both None.
        #: The bytes of one id, and the rank of exactly a str's UTF-8 or a bytes, the same way.
        self._lean_decode_bytes, self._lean_decode, self._lean_token_bytes, self._lean_token_rank = (
            self._vocab.lean_decoders() or (None, None, None, None))
        #: The same for a list of str (and a thread count) in one C call without the GIL; else None.
        self._encode_many = self._vocab.batch_encoder(self._pattern) if self._pattern is not None else None
        if compiled_encoders is not None:
            self._encode_many = compiled_encoders[1]
        #: The C encoder's pattern for a whole text: `_pattern`, 0 (no pre-split: each stretch
        #: is one piece), or None (a custom pattern: `regex` splits each stretch in Python).
        self._native_pattern: int | None = 0 if self._regex is None else self._pattern
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = dict(special_tokens)
        self._special_values = frozenset(special_tokens.values())
        #: allowed set -> its matcher (None: no special token is allowed).
        self._matchers: dict[frozenset[str], SpecialMatcher | None] = {}
        self._lock = threading.Lock()
        self._sorted_tokens: list[bytes] | None = None
        self._sorted_ranks: list[int] = []
        self._token_lengths: dict[int, int] = {}
        self._decoder_map: dict[int, bytes] | None = None

    @property
    def incremental(self) -> bool:
        """True when the C core encodes with the incremental algorithm, False for heap BPE."""
        return self._vocab.incremental

    @property
    def pretokenize(self) -> bool:
        """True when text is pre-split by a pattern; False when each stretch is one piece."""
        return self._regex is not None

    @property
    def pretokenizer(self) -> str:
        """What splits text: "builtin:r50k", "builtin:cl100k" or "builtin:o200k" (tiktoken's
        own patterns, hand-written in C), "compiled" (any other pattern the C compiler takes),
        "regex" (the `regex` package; `pretokenizer_reason` says why), or "none".

        ```
        >>> bpe.pretokenizer
        'builtin:r50k'
        ```
        """
        if self._regex is None:
            return "none"
        if self._pattern is not None:
            return _BUILTIN_NAMES[self._pattern]
        return "compiled" if self._compiled is not None else "regex"

    @property
    def pretokenizer_reason(self) -> str | None:
        """Why a custom pattern is split by the `regex` package rather than in C (else None)."""
        return self._regex_reason

    # ------------------------------------------------------------ splitting
    def _split(self, text: str) -> Split:
        """The pieces of `text` by the `regex` package, packed (for patterns C does not know).

        ```
        >>> bpe._split("hello world")
        (b'hello world', [5, 11])
        ```
        """
        data = text.encode("utf-8")  # UnicodeEncodeError for lone surrogates, as tiktoken
        if self._regex is None:  # no pre-split: the stretch is one piece
            return (data, [len(data)]) if data else (b"", [])
        if self._compiled is not None:
            return data, self._compiled.piece_ends(data)
        found = self._find(text)
        if not found:
            return b"", []
        lengths = map(len, found) if text.isascii() else map(len, map(str.encode, found))
        ends = list(itertools.accumulate(lengths))
        if ends[-1] != len(data):  # the pattern skipped some text
            data = "".join(found).encode("utf-8")
        return data, ends

    def _find(self, text: str) -> list[str]:
        """The pieces of `text` by the `regex` package, as tiktoken's Unicode tables split it.

        ```
        >>> bpe._find("hello world")
        ['hello', ' world']
        ```
        """
        if self._regex is None:  # no pre-split: the stretch is one piece
            return [text] if text else []
        if self._compiled is not None:
            data = text.encode("utf-8")
            return [piece.decode("utf-8") for piece in self._compiled.pretokenize(data)]
        concurrent = len(text) >= _RELEASE_GIL_FROM or None  # other threads run meanwhile
        stand_ins = None if text.isascii() else _stand_ins()
        if stand_ins is not None and not stand_ins.chars.isdisjoint(set(text)):
            mapped = text.translate(stand_ins.table)
            found = [text[match.start():match.end()] for match in self._regex.finditer(mapped, concurrent=concurrent)]
        else:
            mapped = text
            if self._regex.groups:
                found = [match.group() for match in self._regex.finditer(text, concurrent=concurrent)]
            else:
                found = self._regex.findall(text, concurrent=concurrent)
        if not all(found):  # an empty match: tiktoken's engine goes on from it its own way
            spans = list(_engine_matches(self._regex, mapped))
            empty = next((start for start, end in spans if start == end), None)
            if empty is not None:
                raise ValueError(
                    f"the pattern matched the empty string at character {empty} of the text: tiktoken "
                    "cannot encode an empty piece (its BPE panics); make every alternative of the "
                    "pattern match at least one character"
                )
            found = [text[start:end] for start, end in spans]
        return found

    def _matcher(self, allowed_special: AbstractSet[str]) -> SpecialMatcher | None:
        """The C matcher of the special tokens in `allowed_special` (None if there are none),
        built once per distinct set; TypeError like tiktoken's for what is not a set of str.

        ```
        >>> bpe._matcher({"<|endoftext|>", "not a special token"}).strings
        (b'<|endoftext|>',)
        ```
        """
        if not isinstance(allowed_special, (set, frozenset)):
            _require_set(allowed_special)  # raises tiktoken's TypeError
        key = allowed_special if type(allowed_special) is frozenset else frozenset(allowed_special)
        try:
            return self._matchers[key]
        except KeyError:
            pass
        _require_set(allowed_special)
        tokens = sorted(key.intersection(self._special_tokens))
        if "" in tokens:
            raise ValueError(
                "the special token '' is in allowed_special: empty text occurs at every position, "
                "so it would be encoded forever (tiktoken never returns); leave it out of "
                "allowed_special (allowed_special='all' includes it)"
            )
        matcher = None
        if tokens:
            matcher = SpecialMatcher(
                [token.encode("utf-8") for token in tokens], [self._special_tokens[t] for t in tokens]
            )
        if len(self._matchers) >= _MATCHER_CACHE_SIZE:
            self._matchers.clear()
        self._matchers[key] = matcher
        return matcher

    def _segments(self, text: str, allowed_special: AbstractSet[str]) -> Iterator[Segment]:
        """Cuts `text` at the allowed special tokens (each stretch is then split on its own,
        so `\\s++$` and lookaheads see the stretch's end, as in tiktoken).

        ```
        >>> list(bpe._segments("a<|endoftext|>b", {"<|endoftext|>"}))
        [('a', 50256), ('b', None)]
        ```
        """
        matcher = self._matcher(allowed_special)
        if matcher is None:
            yield text, None
            return
        data = text.encode("utf-8")  # UnicodeEncodeError for lone surrogates, as tiktoken
        ids = [self._special_tokens[token.decode("utf-8")] for token in matcher.strings]
        start = 0
        for position, index in matcher.find_all(data):
            yield data[start:position].decode("utf-8"), ids[index]
            start = position + len(matcher.strings[index])
        yield data[start:].decode("utf-8"), None

    def ordinary_encoder(self, fallback: Callable[[Any], list[int]]) -> Callable[[Any], list[int]] | None:
        """encode_ordinary of a str as one C call with no Python frame (`fallback` takes
        anything else), when C splits and the lean functions are available; else None."""
        if self._compiled is not None:
            return self._vocab.ordinary_encoder(0, fallback, self._compiled)
        if self._pattern is None:
            return None
        return self._vocab.ordinary_encoder(self._pattern, fallback)

    def _ordinary(self, text: str) -> list[int]:
        """encode_ordinary without the argument check: split, then shortcut-or-BPE per piece."""
        if self._encode_str is not None:
            return self._encode_str(text)
        if self._compiled is not None:
            return self._compiled.encode(self._vocab, text.encode("utf-8"))[0]
        return self._vocab.encode_joined(*self._split(text))

    def _ordinary_with_last(self, text: str) -> tuple[list[int], int]:
        """`_ordinary(text)` and how many of its tokens the last piece gave."""
        if self._pattern is not None:
            return self._vocab.encode_text(self._pattern, text.encode("utf-8"))
        if self._compiled is not None:
            return self._compiled.encode(self._vocab, text.encode("utf-8"))
        data, ends = self._split(text)
        tokens = self._vocab.encode_joined(data, ends)
        if self._regex is None:  # one piece: all its tokens are the last piece's
            return tokens, len(tokens)
        # Tokens never straddle pieces: count back over the last piece's bytes.
        remaining = ends[-1] - (ends[-2] if len(ends) > 1 else 0) if ends else 0
        count = 0
        while remaining > 0:
            count += 1
            remaining -= len(self._vocab.token_bytes(tokens[-count]) or b"")
        return tokens, count

    def _encode_native(self, text: str, allowed_special: AbstractSet[str]) -> tuple[list[int], int]:
        """The tokens and how many of them came from the last regex piece (0 after a special)."""
        if self._native_pattern is not None:
            matcher = self._matcher(allowed_special)
            return self._vocab.encode_with_specials(self._native_pattern, matcher, text.encode("utf-8"))
        if self._compiled is not None:
            return self._compiled.encode(self._vocab, text.encode("utf-8"), specials=self._matcher(allowed_special))
        tokens: list[int] = []
        last_piece_token_len = 0
        for segment, special in self._segments(text, allowed_special):
            segment_tokens, last = self._ordinary_with_last(segment)
            if segment_tokens:
                tokens += segment_tokens
                last_piece_token_len = last
            if special is not None:
                tokens.append(special)
                last_piece_token_len = 0
        return tokens, last_piece_token_len

    # ------------------------------------------------------------ encoding
    def unless_special_encoder(self, refused: frozenset[str]) -> Any:
        """A function from a str to its encode_ordinary ids, or to None if the str holds the
        text of a token of `refused` (or lone surrogates), in one C call.  None when the text
        is split in Python or a token is not a non-empty str.  (For a list: special_batch_encoder
        with nothing allowed.)

        ```
        >>> encode = bpe.unless_special_encoder(frozenset({"<|endoftext|>"}))
        >>> encode("hello world"), encode("<|endoftext|>")
        ([31373, 995], None)
        ```
        """
        refusal = self._refusal(refused)
        if refusal is None:
            return None
        return self._vocab.unless_special_encoder(self._pattern or 0, refusal[0], self._compiled)

    def unless_special_counter(self, refused: frozenset[str]) -> Any:
        """A function `count(text, limit=None)` giving `count_tokens(text, limit=limit)` with
        nothing allowed and `refused` refused in one C call (limit + 1 for "more than
        limit"), or None for a str that holds a token of `refused` (or lone surrogates, or no
        str, or a bad limit: the full path says what to do).  None when the text is split in
        Python or a refused token is not a non-empty str.

        ```
        >>> count = bpe.unless_special_counter(frozenset({"<|endoftext|>"}))
        >>> count("hello world"), count("hello world", 1), count("<|endoftext|>")
        (2, 2, None)
        ```
        """
        if not self._split_in_c:
            return None
        prepared = self._refusal(refused, self._native_pattern or 0)
        if prepared is None:
            return None
        return self._vocab.unless_special_counter(self._native_pattern or 0, prepared[0], self._compiled)

    def special_batch_encoder(self, refused: frozenset[str], allowed: AbstractSet[str]) -> Any:
        """A function from a list of str (and a thread count) to the ids of each as
        `encode(text, allowed)` gives them, or None for a str holding the text of a token of
        `refused` (or lone surrogates, or no str), in one C call without the GIL.  None when
        the text is split in Python or a refused token is not a non-empty str.

        ```
        >>> encode_many = bpe.special_batch_encoder(frozenset(), frozenset({"<|endoftext|>"}))
        >>> encode_many(["hi<|endoftext|>"], 2)
        [[5303, 50256]]
        ```
        """
        refusal = self._refusal(refused)
        if refusal is None:
            return None
        return self._vocab.special_batch_encoder(self._pattern or 0, refusal[0], self._matcher(allowed), self._compiled)

    def flat_batch_encoder(self, refused: frozenset[str], allowed: AbstractSet[str]) -> Any:
        """`special_batch_encoder`'s flat form (NativeVocab.flat_encoder): one array of the ids
        of all texts and their offsets, the first text holding the text of a token of
        `refused` reported, not encoded.  Without a pre-split pattern each stretch between
        special tokens is one piece, as in `encode`.  None when the text is split in Python or
        a refused token is not a non-empty str.

        ```
        >>> encode_flat = bpe.flat_batch_encoder(frozenset(), frozenset({"<|endoftext|>"}))
        >>> encode_flat(["hi<|endoftext|>"], 2, False, -1, 4, False, 0)[2] is None
        True
        ```
        """
        pattern = 0 if self._compiled is not None else self._native_pattern
        refusal = self._refusal(refused, pattern)
        if refusal is None:
            return None
        return self._vocab.flat_encoder(pattern, refusal[0], self._matcher(allowed), self._compiled)

    def _refusal(self, refused: frozenset[str], pattern: int | None = -1) -> tuple[SpecialMatcher | None] | None:
        """(the C matcher of the texts of `refused`, None if there are none), for the C
        encoders that refuse them; None where they cannot: their `pattern` (default
        `_pattern`, the built-in one, or 0 for a compiled one) is None (the text is split in
        Python), or a token is not a non-empty str."""
        if pattern == -1:
            pattern = 0 if self._compiled is not None else self._pattern
        if pattern is None or "" in refused:
            return None
        prepared = refusal(refused)
        return None if prepared is None else (prepared.matcher,)

    # ------------------------------------------------------------ streams and bounded calls
    @property
    def _split_in_c(self) -> bool:
        """Whether C splits the text (a built-in or compiled pattern, or none): streams and
        bounded calls then run in C."""
        return self._native_pattern is not None or self._compiled is not None

    def stream(self, allowed: frozenset[str], refused: frozenset[str]) -> NativeStream | None:
        """A C stream encoding as `encode(text, allowed)` does, that fails on a refused
        token's text (a non-empty str each); None when the text is split in Python (a
        pattern `regex` splits: see streaming)."""
        if not self._split_in_c:
            return None
        prepared = refusal(refused)
        return NativeStream(
            self._vocab, self._native_pattern or 0, compiled=self._compiled, allowed=self._matcher(allowed),
            refused=prepared.matcher if prepared is not None else None,
        )

    def bounded(
        self, text: str, cap: int | None, allowed: frozenset[str], refused: frozenset[str], want_ids: bool
    ) -> tuple[list[int], int, bool]:
        """`encode(text, allowed)` stopped as soon as more than `cap` ids are certain: (the
        ids if want_ids and cap was not passed, else []; their count or cap + 1; whether cap
        was passed).  A refused token's text in what is read raises encode's ValueError.  One
        C call, except for a custom pattern (the text is then encoded whole)."""
        _require_str(text)
        prepared = refusal(refused)
        if not self._split_in_c or prepared is None:
            ids = self._encode_whole(text, allowed, refused)
            exceeded = cap is not None and len(ids) > cap
            count = cap + 1 if exceeded else len(ids)
            return (ids if want_ids and not exceeded else []), count, exceeded
        if prepared.has_empty:
            raise_disallowed_special_token("")
        result = self._vocab.bounded(
            self._native_pattern or 0, self._matcher(allowed), prepared.matcher, text, cap, want_ids, self._compiled
        )
        if isinstance(result, int):
            raise_disallowed_special_token(prepared.texts[result])
        ids, count, exceeded, _ = result
        return (ids if want_ids and not exceeded else []), count, exceeded

    def _encode_whole(self, text: str, allowed: frozenset[str], refused: frozenset[str]) -> list[int]:
        """`encode(text, allowed)` after the refused check, lone surrogates replaced as
        tiktoken does (the bounded calls for a pattern split by `regex`)."""
        if refused:
            token = first_special_in(refused, text)
            if token is not None:
                raise_disallowed_special_token(token)
        try:
            return self.encode(text, allowed)
        except UnicodeEncodeError:
            return self.encode(utf8_replacing_surrogates(text).decode("utf-8"), allowed)

    def truncate(
        self, text: str, max_tokens: int, allowed: frozenset[str], refused: frozenset[str]
    ) -> tuple[list[int], str]:
        """The longest prefix of `text` (on a character boundary) whose encoding has at most
        max_tokens ids and starts the encoding of `text`: (its ids, the prefix).  One C call
        that reads the text only as far as more than max_tokens ids are certain, except for
        a pattern split by `regex`."""
        _require_str(text)
        prepared = refusal(refused)
        if not self._split_in_c or prepared is None:
            return self._truncate_by_encoding(text, max_tokens, allowed, refused)
        if prepared.has_empty:
            raise_disallowed_special_token("")
        result = self._vocab.truncate(
            self._native_pattern or 0, self._matcher(allowed), prepared.matcher, text, max_tokens, self._compiled
        )
        if isinstance(result, int):
            raise_disallowed_special_token(prepared.texts[result])
        ids, prefix_bytes, characters = result
        if characters < 0:  # the text had lone surrogates: map the bytes back
            return ids, _text_prefix(text, utf8_replacing_surrogates(text)[:prefix_bytes])
        return ids, text[:characters]

    def _truncate_by_encoding(
        self, text: str, max_tokens: int, allowed: frozenset[str], refused: frozenset[str]
    ) -> tuple[list[int], str]:
        """truncate for a pattern split by `regex`: the whole text encoded, then the longest prefix of
        whole characters whose own encoding is the first ids (the candidates from the
        longest down, each checked by encoding it)."""
        ids = self._encode_whole(text, allowed, refused)
        if len(ids) <= max_tokens:
            return ids, text
        ids = ids[:max_tokens]
        lengths = [len(self.decode_single_token_bytes(token)) for token in ids]
        data = utf8_replacing_surrogates(text)
        end = sum(lengths)
        for keep in range(len(ids), 0, -1):
            if end >= len(data) or data[end] & 0xC0 != 0x80:
                prefix = _text_prefix(text, data[:end])
                if prefix is not None and self.bounded(prefix, None, allowed, frozenset(), True)[0] == ids[:keep]:
                    return ids[:keep], prefix
            end -= lengths[keep - 1]
        return [], ""

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes `text`, treating special-token text as ordinary text.

        ```
        >>> bpe.encode_ordinary("<|endoftext|>")
        [27, 91, 437, 1659, 5239, 91, 29]
        ```
        """
        if self._encode_str is not None and type(text) is str:  # the short-text fast path
            return self._encode_str(text)
        return self._ordinary(_require_str(text))

    def encode(self, text: str, allowed_special: AbstractSet[str]) -> list[int]:
        """Encodes `text`; the special tokens in `allowed_special` become their ids.

        ```
        >>> bpe.encode("hi<|endoftext|>", {"<|endoftext|>"})
        [5303, 50256]
        ```
        """
        _require_str(text)
        if self._native_pattern is not None:  # one C call: specials, split, BPE
            matcher = self._matcher(allowed_special)
            return self._vocab.encode_with_specials(self._native_pattern, matcher, text.encode("utf-8"))[0]
        if self._compiled is not None:  # the same with a compiled pattern
            matcher = self._matcher(allowed_special)
            return self._compiled.encode(self._vocab, text.encode("utf-8"), specials=matcher)[0]
        tokens: list[int] = []
        for segment, special in self._segments(text, allowed_special):
            tokens += self._ordinary(segment)
            if special is not None:
                tokens.append(special)
        return tokens

    def encode_to_tiktoken_buffer(self, text: str, allowed_special: AbstractSet[str]) -> memoryview:
        """Like `encode`, as a read-only buffer of native uint32 (for numpy.frombuffer).

        The C core writes the ids straight into one array: no Python list in between.

        ```
        >>> bytes(bpe.encode_to_tiktoken_buffer("hello", set()))
        b'\\x8dz\\x00\\x00'
        ```
        """
        _require_str(text)
        _require_text_and_set(text, allowed_special)
        if self._native_pattern is not None:  # one C call, straight into the array
            matcher = self._matcher(allowed_special)
            return self._vocab.encode_with_specials_buffer(self._native_pattern, matcher, text.encode("utf-8"))
        return memoryview(array("I", self.encode(text, allowed_special)))

    def _encode_bytes(self, data: bytes) -> list[int]:
        """Encodes bytes that may not be valid UTF-8, the way tiktoken does.

        The valid prefix is encoded as text; the tokens of its last piece (widened over
        trailing whitespace tokens) are re-encoded together with the invalid tail.

        ```
        >>> bpe._encode_bytes(b"hello \\xe4\\xbd")
        [31373, 220, 19526]
        ```
        """
        _require_bytes(data)
        try:
            return self.encode_ordinary(data.decode("utf-8"))
        except UnicodeDecodeError as error:
            valid_up_to = error.start
        tokens, last_len = self._encode_native(data[:valid_up_to].decode("utf-8"), frozenset())
        last_len = self._increase_last_piece_token_len(tokens, last_len)
        if tokens and last_len > 0:
            unstable = self._vocab.decode_bytes(tokens[-last_len:]) + data[valid_up_to:]
            del tokens[-last_len:]
        else:
            unstable = data[valid_up_to:]
        return tokens + self._vocab.encode_pieces([unstable])

    def _increase_last_piece_token_len(self, tokens: Sequence[int], last_len: int) -> int:
        """Widens the last piece over preceding all-whitespace tokens (split instability).

        Patterns like `\\s*[\\r\\n]+` can merge whitespace pieces once more text arrives, so
        tokens made only of spaces, newlines and tabs before the last piece are unstable too.
        """
        if last_len > 0 and self._is_all_space(tokens[len(tokens) - last_len]):
            while last_len < len(tokens) and self._is_all_space(tokens[len(tokens) - last_len - 1]):
                last_len += 1
        return last_len

    def _is_all_space(self, token: int) -> bool:
        """True for a mergeable token made only of b' ', b'\\n' and b'\\t'."""
        if token in self._special_values:
            return False
        data = self._vocab.token_bytes(token)
        return data is not None and not data.strip(b" \n\t")

    def encode_with_unstable(
        self, text: str, allowed_special: AbstractSet[str]
    ) -> tuple[list[int], list[list[int]]]:
        """Stable tokens of `text`, and the token sequences that may continue it.

        The tokens of the last regex piece (and whitespace before it) are unstable: more text
        could change them.  Each completion is a token sequence that decodes to a string
        starting with those unstable bytes.  Completions come in no particular order.

        ```
        >>> stable, completions = bpe.encode_with_unstable("hello fanta", set())
        >>> stable
        [31373]
        >>> [277, 4910] in completions  # " f" + "anta...", one of 1432
        True
        ```
        """
        _require_str(text)
        _require_text_and_set(text, allowed_special)
        tokens, last_len = self._encode_native(text, allowed_special)
        if last_len == 0:
            return tokens, []
        last_len = self._increase_last_piece_token_len(tokens, last_len)
        unstable = self._vocab.decode_bytes(tokens[-last_len:])
        del tokens[-last_len:]
        return tokens, list(map(list, self._completions(unstable)))

    def _completions(self, unstable: bytes) -> set[tuple[int, ...]]:
        """Every token sequence that may follow the stable tokens (tiktoken's brute force)."""
        sorted_tokens, sorted_ranks, lengths = self._sorted_vocabulary()
        # Single tokens that start with the unstable bytes.
        first, end = _prefix_range(sorted_tokens, unstable)
        completions: set[tuple[int, ...]] = set(zip(sorted_ranks[first:end]))
        # A token straddling each other position: re-encode prefix + token, keep the tokens
        # up to the end of the unstable bytes.
        for cut in range(1, len(unstable)):
            prefix = unstable[:cut]
            first, end = _prefix_range(sorted_tokens, unstable[cut:])
            for token_bytes in sorted_tokens[first:end]:
                possibility = prefix + token_bytes
                try:
                    encoded = self._ordinary(possibility.decode("utf-8"))
                except UnicodeDecodeError:
                    encoded = self._vocab.bpe(possibility)
                count = covered = 0
                while count < len(encoded) and covered < len(unstable):
                    covered += lengths[encoded[count]]
                    count += 1
                completions.add(tuple(encoded[:count]))
        # A whitespace last character may split off once more text arrives.
        if len(unstable) > 1:
            char, size = _last_char(unstable)
            if char is not None and len(unstable) > size and char in _WHITE_SPACE:
                split = self._vocab.bpe(unstable[:-size]) + self._vocab.bpe(unstable[-size:])
                completions.add(tuple(split))
        return completions

    def _sorted_vocabulary(self) -> tuple[list[bytes], list[int], dict[int, int]]:
        """Mergeable token bytes sorted, their ranks, and rank -> length (built once, lazily)."""
        if self._sorted_tokens is None:
            with self._lock:
                if self._sorted_tokens is None:
                    items = sorted(self._mergeable_ranks.items())
                    self._sorted_ranks = [rank for _, rank in items]
                    self._token_lengths = {rank: len(token) for token, rank in items}
                    self._sorted_tokens = [token for token, _ in items]
        return self._sorted_tokens, self._sorted_ranks, self._token_lengths

    def encode_single_token(self, piece: bytes) -> int:
        """The id of exactly these bytes (mergeable, or a special token's UTF-8); KeyError if none.

        ```
        >>> bpe.encode_single_token(b"hello")
        31373
        ```
        """
        piece = _require_bytes(piece)
        lean = self._lean_token_rank  # (exact bytes only)
        rank = lean(piece) if lean is not None and type(piece) is bytes else self._vocab.rank(piece)
        if rank is not None:
            return rank
        if not piece and isinstance(self._mergeable_ranks, dict) and b"" in self._mergeable_ranks:
            return self._mergeable_ranks[b""]  # an empty mergeable token (decode-only in C)
        try:
            return self._special_tokens[piece.decode("utf-8")]
        except (UnicodeDecodeError, KeyError):
            raise KeyError(piece) from None

    def encode_single_piece(self, piece: bytes) -> list[int]:
        """Encodes bytes as one piece (no regex split, no special tokens).

        ```
        >>> bpe.encode_single_piece(b"helloqqqq")
        [31373, 38227, 38227]
        ```
        """
        return self._vocab.encode_pieces([_require_bytes(piece)])

    # ------------------------------------------------------------ decoding
    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """Concatenated bytes of `tokens`; KeyError('Invalid token for decoding: N') if unknown.

        ```
        >>> bpe.decode_bytes([31373, 995])
        b'hello world'
        ```
        """
        if self._lean_decode_bytes is not None:
            data = self._lean_decode_bytes(tokens)
            if data is not None:
                return data
        values = _as_list(tokens)
        try:
            return self._vocab.decode_bytes(values)
        except (TypeError, OverflowError):
            # Raises tiktoken's error for the first bad element, or converts what the C
            # wrapper would not take (e.g. integer-like objects) and decodes that.
            return self._vocab.decode_bytes(_token_list(values))

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens too); KeyError('N') if unknown.

        ```
        >>> bpe.decode_single_token_bytes(50256)
        b'<|endoftext|>'
        ```
        """
        token = _token_id(token)
        data = self._decoder().get(token)
        if data is None:
            raise KeyError(str(token))
        return data

    def _decoder(self) -> dict[int, bytes]:
        """id -> bytes for every token, specials included (built once, lazily)."""
        if self._decoder_map is None:
            with self._lock:
                if self._decoder_map is None:
                    decoder = {rank: token for token, rank in self._mergeable_ranks.items()}
                    for text, rank in self._special_tokens.items():
                        decoder.setdefault(rank, text.encode("utf-8"))
                    self._decoder_map = decoder
        return self._decoder_map

    def token_byte_values(self) -> list[bytes]:
        """All mergeable tokens' bytes, sorted.

        ```
        >>> bpe.token_byte_values()[:2]
        [b'\\x00', b'\\x01']
        ```
        """
        return list(self._sorted_vocabulary()[0])

    def clear_cache(self) -> None:
        """Forgets the short pieces encoding has kept the ids of (`Encoding.clear_cache`)."""
        self._vocab.forget_pieces()

