"""The gateway API: `count_tokens` (with and without `limit`), `encode(max_tokens=)`,
`truncate`, and the shape of their cost.

Every check is made against `Encoding.encode` on the same text with the same special-token
arguments, for the five main encodings and for a custom-pattern Encoding (whose split is
done with the `regex` package rather than in C):

- `count_tokens(text)` == len(encode(text)), or the same ValueError;
- `count_tokens(text, limit=N)` is the count when it is at most N and None otherwise;
- `encode(text, max_tokens=N)` is encode(text) when it fits, else TokenLimitError (a
  ValueError with `.limit == N`);
- `truncate(text, n)` returns the longest whole-token prefix that re-encodes to itself,
  checked against a brute-force reference.

Special-token arguments: allowed "all", a subset, a subset with disallowed (), disallowed
"all" (the default) and disallowed ().  Texts: hypothesis strings built from fragments that
stress the splitter and special tokens, runs of one character, and slices of the corpora.

The latency tests assert the shape of the cost, never seconds: counting with a limit does
the same work for 2**20 and 2**26 characters (measured deterministically as the bytes fed to
the C stream, and loosely by time), and doubling a pathological input at most about doubles
the time without a limit.

The regression tests at the end pin bugs found while writing this module, each fixed since.
"""
from __future__ import annotations

import contextlib
import copy
import pickle
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
from support import CORPUS_FILES, MAIN_ENCODINGS, RUN_PROBE_CHARACTERS, WINDOW_FRAGMENTS, best_time, chunks_of
from tiktoken_inc import Encoding, TokenLimitError
from tiktoken_inc._native import NativeStream

ENCODINGS = MAIN_ENCODINGS + ["custom"]
CUSTOM_PAT = r"\S+|\s+"

SPECIAL_TEXTS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]
FRAGMENTS = SPECIAL_TEXTS + [
    "<|", "|>", "<|endoftext", "endoftext|>", "<|endoftext|", " ", "  ", "   \n", "\n\n", "\r\n", "\t",
    "'s", "'LL", "123456", "中文", "😀", "퀠퀠", "աա", " hello", "World", "!!!", "\u00a0", "\u3000", "é",
]
#: Short strings mixing arbitrary text with fragments that stress the splitter and specials.
TEXTS = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(FRAGMENTS)), max_size=16).map("".join)

RUN_CHARS = [" ", "a", "中", "\n", "0", "😀", "퀠"]
RUN_LENGTHS = [1, 2, 3, 7, 64, 255, 1000, 4097]
#: Longer than the first special-token search window (64 Ki characters).
LONG_RUN = 70_000


# --------------------------------------------------------------------------- helpers



@pytest.fixture(scope="module")
def get_enc(encoding, ranks_of):
    """get_enc(name): a registered encoding, or "custom": cl100k's ranks split by CUSTOM_PAT."""
    cache: dict[str, Encoding] = {}

    def get(name: str) -> Encoding:
        if name != "custom":
            return encoding(name)
        if name not in cache:
            cache[name] = Encoding(
                "custom", pat_str=CUSTOM_PAT, mergeable_ranks=ranks_of("cl100k_base"),
                special_tokens={"<|endoftext|>": 100257},
            )
        return cache[name]

    return get


#: The special-token arguments every check runs with (the subset is <|endoftext|>).
SPECIAL_CONFIGS = {
    "allowed=all": {"allowed_special": "all"},
    "allowed=subset": {"allowed_special": {"<|endoftext|>"}},
    "allowed=subset,disallowed=()": {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
    "disallowed=all": {},
    "disallowed=()": {"disallowed_special": ()},
}


def outcome(fn, *args, **kwargs):
    """("ok", result) or (exception type, message) for a ValueError."""
    try:
        return "ok", fn(*args, **kwargs)
    except ValueError as error:
        return type(error), str(error)


def first_disallowed_start(enc: Encoding, text: str, config: dict) -> int:
    """Where the first disallowed special-token text starts in `text` (encode raised for it)."""
    from tiktoken_inc.core import special_token_regex

    allowed = config.get("allowed_special", set())
    allowed = enc.special_tokens_set if allowed == "all" else set(allowed)
    disallowed = config.get("disallowed_special", "all")
    disallowed = enc.special_tokens_set - allowed if disallowed == "all" else set(disallowed)
    return special_token_regex(frozenset(disallowed)).search(text).start()


def limits_around(count: int) -> list[int]:
    """0 and the limits just below, at and above `count`."""
    return sorted({0, max(count - 1, 0), count, count + 1})


def check_count(enc: Encoding, text: str, config: dict) -> None:
    """count_tokens == len(encode) (or the same ValueError); limits around the count;
    encode(max_tokens=) around the count."""
    expected = outcome(enc.encode, text, **config)
    got = outcome(enc.count_tokens, text, **config)
    if expected[0] != "ok":
        assert got == expected, (text[:80], config)
        for limit in (0, 1, 10**9):
            check_stopped_early(enc, text, config, limit, expected)
        return
    full = expected[1]
    assert got == ("ok", len(full)), (text[:80], config)
    for limit in limits_around(len(full)):
        want = len(full) if len(full) <= limit else None
        assert enc.count_tokens(text, limit=limit, **config) == want, (text[:80], config, limit)
        if len(full) <= limit:
            assert enc.encode(text, max_tokens=limit, **config) == full
        else:
            with pytest.raises(TokenLimitError) as info:
                enc.encode(text, max_tokens=limit, **config)
            assert isinstance(info.value, ValueError) and info.value.limit == limit


def check_stopped_early(enc: Encoding, text: str, config: dict, limit: int, error) -> None:
    """For a text encode rejects (disallowed special), a limited call either raises the same
    ValueError or reports "too many tokens" -- the latter only when the text before the
    special already encodes to more than `limit` tokens."""
    head = text[: first_disallowed_start(enc, text, config)]
    head_count = len(enc.encode(head, **{**config, "disallowed_special": ()}))
    got = outcome(enc.count_tokens, text, limit=limit, **config)
    assert got == error or (got == ("ok", None) and head_count > limit), (text[:80], config, limit, got)
    capped = outcome(enc.encode, text, max_tokens=limit, **config)
    assert capped == error or (capped[0] is TokenLimitError and head_count > limit), (text[:80], limit, capped)


def brute_force_truncation(enc: Encoding, full: list[int], n: int, config: dict) -> int:
    """The largest k <= n such that full[:k] decodes to UTF-8 that encodes back to full[:k]."""
    for k in range(min(n, len(full)), 0, -1):
        try:
            prefix = enc.decode_bytes(full[:k]).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if enc.encode(prefix, **config) == full[:k]:
            return k
    return 0


def check_truncate(enc: Encoding, text: str, n: int, config: dict) -> None:
    """truncate(text, n): its properties, and maximality against the brute-force reference."""
    expected = outcome(enc.encode, text, **config)
    if expected[0] != "ok":  # a disallowed special: the same error, or a sound early stop
        got = outcome(enc.truncate, text, n, **config)
        if got != expected:
            start = first_disallowed_start(enc, text, config)
            head_count = len(enc.encode(text[:start], **{**config, "disallowed_special": ()}))
            assert got[0] == "ok" and head_count > n and text[:start].startswith(got[1][1]), (text[:80], n, got)
        return
    full = expected[1]
    tokens, prefix = enc.truncate(text, n, **config)
    assert len(tokens) <= n
    assert text.startswith(prefix)
    assert tokens == full[: len(tokens)]
    assert enc.encode(prefix, **config) == tokens
    if len(full) <= n:
        assert (tokens, prefix) == (full, text)
    assert len(tokens) == brute_force_truncation(enc, full, n, config), (text[:80], config, n)


# --------------------------------------------------------------------------- exact counts


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=150)
@given(text=TEXTS)
def test_count_and_limits_random(name, get_enc, text):
    """Random text, every special-token configuration: counts, limits and max_tokens."""
    enc = get_enc(name)
    for config in SPECIAL_CONFIGS.values():
        check_count(enc, text, config)


#: Longer text for the 64-byte windows that split the pending text of a bounded call (its
#: blocks are a stream's feeds): ASCII with whitespace runs, contractions and non-ASCII
#: characters (combining marks, CJK, no-break spaces) wherever a block or a window ends.
WINDOW_TEXTS = st.lists(
    st.sampled_from([f for f in WINDOW_FRAGMENTS if f.isascii()] * 4 + [f for f in WINDOW_FRAGMENTS if not f.isascii()]),
    min_size=40, max_size=400,
).map("".join)


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@settings(max_examples=60, deadline=None)
@given(text=WINDOW_TEXTS, n=st.integers(0, 200))
def test_count_and_truncate_across_windows(name, get_enc, text, n):
    """Counts and limits around the count, and truncate at n, half and around the count."""
    enc = get_enc(name)
    config = {"disallowed_special": ()}
    check_count(enc, text, config)
    count = len(enc.encode(text, **config))
    for limit in sorted({n, count // 2, max(count - 1, 0), count}):
        check_truncate(enc, text, limit, config)


@pytest.mark.parametrize("name", ENCODINGS)
def test_count_and_limits_runs(name, get_enc):
    """Runs of one character (the classic BPE worst case): counts and limits, alone and
    framed by letters; and one run longer than the first special-token search window."""
    enc = get_enc(name)
    configs = [{}, {"disallowed_special": ()}]
    for char in RUN_CHARS:
        for length in RUN_LENGTHS:
            for text in (char * length, "x" + char * length + "y"):
                for config in configs:
                    check_count(enc, text, config)
        check_count(enc, "x" + char * LONG_RUN, {})


@pytest.mark.parametrize("name", ENCODINGS)
def test_count_and_limits_corpora(name, get_enc, corpora):
    """Chunks of every corpus file, each configuration in turn; and 1.5 Mi characters of each
    file counted at once (many special-token search windows, two stream chunks)."""
    enc = get_enc(name)
    configs = list(SPECIAL_CONFIGS.values())
    for file_name in CORPUS_FILES:
        text = (corpora / file_name).read_text(encoding="utf-8")
        for index, chunk in enumerate(chunks_of(text[: 1 << 17], 3000)):
            check_count(enc, chunk, configs[index % len(configs)])
        head = text[: 3 << 19 if name != "custom" else 1 << 18]  # custom: split in Python, slower
        assert enc.count_tokens(head) == len(enc.encode(head)), file_name


def test_disallowed_special_beyond_the_limit(get_enc):
    """A disallowed special far into a long text: counting it all raises encode's ValueError;
    with a small limit the call may stop before reaching it (None / TokenLimitError)."""
    enc = get_enc("cl100k_base")
    text = "hello world " * 100_000 + "<|endoftext|>"
    error = outcome(enc.encode, text)
    assert error[0] is ValueError
    assert outcome(enc.count_tokens, text) == error
    for limit in (0, 10, 1000):
        check_stopped_early(enc, text, {}, limit, error)


# --------------------------------------------------------------------------- API edges


def test_token_limit_error():
    """TokenLimitError is exported, is a ValueError, and carries the limit."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    with pytest.raises(tiktoken_inc.TokenLimitError) as info:
        enc.encode("hello world, hello world", max_tokens=3)
    assert isinstance(info.value, ValueError)
    assert info.value.limit == 3
    assert info.value.count >= 4
    assert "3" in str(info.value)
    assert enc.encode("", max_tokens=0) == []
    assert enc.count_tokens("", limit=0) == 0
    assert enc.truncate("", 0) == ([], "")


@pytest.mark.parametrize("bad", [-1, True, 1.5, "10"])
def test_bad_limits_raise_value_error(bad):
    """A limit that is not a non-negative int is a ValueError (never a TokenLimitError)."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    for call in (
        lambda: enc.count_tokens("hello", limit=bad),
        lambda: enc.encode("hello", max_tokens=bad),
        lambda: enc.truncate("hello", bad),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert not isinstance(info.value, TokenLimitError)


def test_non_str_text_raises_type_error():
    """count_tokens and truncate reject bytes with TypeError."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    with pytest.raises(TypeError):
        enc.count_tokens(b"hello")
    with pytest.raises(TypeError):
        enc.truncate(b"hello", 3)


# --------------------------------------------------------------------------- truncate


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=100)
@given(text=TEXTS, n=st.integers(0, 12))
def test_truncate_random(name, get_enc, text, n):
    """Random text, every configuration, n = a small number and around the full count."""
    enc = get_enc(name)
    for config in SPECIAL_CONFIGS.values():
        full = outcome(enc.encode, text, **config)
        count = len(full[1]) if full[0] == "ok" else 0
        for limit in sorted({n, count // 2, max(count - 1, 0), count, count + 1}):
            check_truncate(enc, text, limit, config)


@pytest.mark.parametrize("name", ENCODINGS)
def test_truncate_runs(name, get_enc):
    """Short runs of one character (including ones whose tokens straddle characters, like
    "퀠" in cl100k, where no whole-token prefix decodes) at several n."""
    enc = get_enc(name)
    for char in RUN_CHARS:
        for length in (1, 2, 5, 33, 300):
            for n in (0, 1, 2, 7, 50):
                check_truncate(enc, char * length, n, {})


@pytest.mark.parametrize("name", ENCODINGS)
def test_truncate_corpora(name, get_enc, corpora):
    """Corpus chunks of about 600 characters, at n = 0, 1, 17 and 100."""
    enc = get_enc(name)
    for file_name in CORPUS_FILES:
        text = (corpora / file_name).read_text(encoding="utf-8")[:20_000]
        for index, chunk in enumerate(chunks_of(text, 600)):
            check_truncate(enc, chunk, (0, 1, 17, 100)[index % 4], {"disallowed_special": ()})


#: Open pieces longer than 4 Ki bytes that are not one character repeated, and runs.
LONG_PIECES = ["ab" * 40_000, "\u4e2d\u6587" * 20_000, " \t" * 40_000, "a" * 70_000 + "b" * 70_000, " " * 70_000]


@pytest.mark.parametrize("name", ENCODINGS)
def test_bounded_calls_on_long_open_pieces(name, get_enc):
    """Bounded calls read the caller's text where it is; a long open piece that is not a run
    makes the stream copy the text it holds once and take the next blocks as a stream does
    (csrc/stream.c, own_text): counts, limits, max_tokens and truncate on such pieces alone,
    before a special token and after other text, under every special-token configuration."""
    enc = get_enc(name)
    for piece in LONG_PIECES:
        for text in (piece, piece + "<|endoftext|> tail", "x " + piece + "\n"):
            for config in SPECIAL_CONFIGS.values():
                check_count(enc, text, config)
                for n in (0, 1, 7):
                    check_truncate(enc, text, n, config)


#: csrc/stream.c: a cut in a run of more characters than this is checked on this many.
RUN_STAND_IN = 8


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_run_matched_whole_for_every_length_or_none(name):
    """truncate checks a cut in an open run (one character repeated) by matching RUN_STAND_IN
    characters of it instead of the run (csrc/stream.c, match_at_end).  That is exact if,
    for each character, `regex` (tiktoken's pattern) matches a run of it whole at the end of
    the text for every length past RUN_STAND_IN or for none of them."""
    from tiktoken_inc._corebpe import compile_pattern

    pattern = compile_pattern(tiktoken_inc.get_encoding(name)._pat_str)
    lengths = list(range(RUN_STAND_IN, RUN_STAND_IN + 12)) + [100, 101, 4097]
    for char in RUN_PROBE_CHARACTERS + ["\r\n"[0], "\u200d", "\U0001d7d8", "\u00ad"]:
        whole = {pattern.match(char * length).end() == length for length in lengths}
        assert len(whole) == 1, (name, char)


#: Runs cut at every token: characters of each kind, each run alone and followed by others.
CUT_RUN_CHARACTERS = [" ", "a", "A", "\u4e2d", "\n", "'", "\u00a0", "\U0001F600", "0", "\t", "!", "\u0301"]
CUT_RUN_TAILS = ["", "b", " x", "\n", "'s", "<|endoftext|>z"]


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_truncate_at_every_token_of_runs(name, get_enc):
    """Runs just past RUN_STAND_IN characters and longer, alone and followed by another
    character, a contraction or a special token: truncate at every n from 0 to past the count
    (every 7th past 200 ids; each cut inside the run is checked on RUN_STAND_IN characters), against the
    brute-force reference, with the specials refused, allowed and ordinary."""
    enc = get_enc(name)
    for char in CUT_RUN_CHARACTERS:
        for length in (RUN_STAND_IN - 1, RUN_STAND_IN, RUN_STAND_IN + 1, 17, 130, 600):
            for tail in CUT_RUN_TAILS:
                text = char * length + tail
                for config in ({}, {"allowed_special": "all"}, {"disallowed_special": ()}):
                    expected = outcome(enc.encode, text, **config)
                    count = len(expected[1]) if expected[0] == "ok" else 3
                    for n in range(0, count + 2, 1 if count < 200 else 7):
                        check_truncate(enc, text, n, config)


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_bounded_calls_on_runs_of_every_class(name, get_enc):
    """A run in the caller's text is probed on RUN_STAND_IN of its characters, its answers
    moved to the run's end (csrc/stream.c, certain_length): count, limits around the count,
    max_tokens and truncate on runs of a character of each class the patterns tell apart,
    longer than the one-shot bound of short texts, alone and followed by other characters."""
    enc = get_enc(name)
    for char in RUN_PROBE_CHARACTERS:
        for tail in ("", "a", " b", "'s", "\n", "0"):
            text = char * (1500 // len(char.encode()) + 3) + tail
            check_count(enc, text, {})
            for n in (1, 7, 100):
                check_truncate(enc, text, n, {})


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
def test_truncate_walks_back_over_specials(name, encoding, reference):
    """truncate finds where its k-th id ends by walking back from the text the stream's ids
    cover, over each id's bytes (a special's where the run put one): cuts at, just before and
    just after allowed specials that lie blocks (64 KiB) into the text, where the walk crosses
    ids past the cap and specials, against tiktoken and the brute-force reference."""
    enc, theirs = encoding(name), reference(name)
    text = ("Words, 'til the end: \u4e2d\u6587 42  " * 7 + "<|endoftext|>") * 1200
    config = {"allowed_special": "all"}
    full = enc.encode(text, **config)
    assert full == theirs.encode(text, **config)
    special = enc.encode("<|endoftext|>", **config)[0]
    places = [i for i, token in enumerate(full) if token == special]
    for place in places[len(places) // 3 :: len(places) // 3]:
        for n in range(place - 2, place + 3):
            check_truncate(enc, text, n, config)
            tokens, prefix = enc.truncate(text, n, **config)
            assert theirs.encode(prefix, **config) == tokens


# --------------------------------------------------------------------------- regressions
# Each test pins a bug found while writing this module, now fixed.


def test_surrogate_pair_across_search_window():
    """A surrogate pair ("\\ud83d\\ude00", which encode pairs up into one emoji) placed where the
    first special-token search window is cut: count_tokens and encode(max_tokens=) must agree
    with encode."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    keep = max(map(len, enc.special_tokens_set)) - 1
    position = (1 << 16) - keep - 1  # the last character of the first stretch
    text = "a" * position + "\ud83d\ude00" + " tail" * 20_000
    full = enc.encode(text)
    assert enc.count_tokens(text) == len(full)
    assert enc.encode(text, max_tokens=len(full)) == full


def test_truncate_lone_surrogate_prefix():
    """With a lone surrogate in the text, the returned prefix must still be a prefix of it."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    text = "\ud800 hello world and more"
    tokens, prefix = enc.truncate(text, 2)
    assert text.startswith(prefix)
    assert tokens == enc.encode(prefix)


def test_truncate_work_is_linear(monkeypatch):
    """truncate("퀠" * n, n) in cl100k (every token boundary after the first is inside a
    character): the ids decoded and characters re-encoded while searching for the prefix
    must stay within a constant times n (today: about n**2 / 2 ids)."""
    shared = tiktoken_inc.get_encoding("cl100k_base")
    enc = Encoding(  # a private instance, to instrument
        "cl100k_copy", pat_str=shared._pat_str, mergeable_ranks=shared._mergeable_ranks,
        special_tokens=shared._special_tokens,
    )
    work = [0]
    decode_bytes, encode = enc.decode_bytes, enc.encode

    def counting_decode_bytes(tokens):
        work[0] += len(tokens)
        return decode_bytes(tokens)

    def counting_encode(text, **kwargs):
        work[0] += len(text)
        return encode(text, **kwargs)

    monkeypatch.setattr(enc, "decode_bytes", counting_decode_bytes)
    monkeypatch.setattr(enc, "encode", counting_encode)
    n = 2000
    assert enc.truncate("퀠" * n, n) == ([], "")
    assert work[0] <= 16 * n, work[0]


def test_token_limit_error_pickles():
    """TokenLimitError survives pickle and copy: a process pool sends a worker's exception to
    the parent by pickling it (today the pool breaks: BrokenProcessPool)."""
    error = TokenLimitError(5)
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is TokenLimitError and clone.limit == 5 and str(clone) == str(error)


def test_allowed_special_unknown_to_the_encoding():
    """An allowed_special entry the encoding does not have (a config shared by encodings) is
    ordinary text for encode; the bounded APIs must agree instead of raising KeyError."""
    enc = tiktoken_inc.get_encoding("r50k_base")
    config = {"allowed_special": {"<|endoftext|>", "<|endofprompt|>"}}
    text = "a<|endofprompt|>b<|endoftext|>"
    full = enc.encode(text, **config)
    assert enc.count_tokens(text, **config) == len(full)
    assert enc.encode(text, max_tokens=100, **config) == full
    assert enc.truncate(text, 100, **config) == (full, text)


# --------------------------------------------------------------------------- latency shape


@pytest.fixture(scope="module")
def long_runs():
    """Runs of spaces, "a" and "中" of 2**20 and 2**26 characters (built once)."""
    return {(char, exponent): char * (1 << exponent) for char in (" ", "a", "中") for exponent in (20, 26)}


def fed_bytes(enc, text: str, limit: int, config: dict) -> int:
    """The bytes of `text` that count_tokens(text, limit=limit, **config) reads: the C bounded
    call's own count of what it consumed."""
    allowed, refused = enc._special_sets(config.get("allowed_special", frozenset()),
                                         config.get("disallowed_special", "all"))
    core = enc._core_bpe
    return core._vocab.bounded(core._native_pattern, core._matcher(allowed), core._refusal(refused)[0],
                               text, limit, False)[3]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("config", [{}, {"disallowed_special": ()}], ids=["disallowed=all", "disallowed=()"])
def test_limited_count_work_does_not_grow_with_input(name, config, long_runs):
    """count_tokens(run, limit=1000) reads the same number of bytes (at most 4 MiB) for runs of
    2**20 and 2**26 characters, and takes about the same time (<= 10x for 64x the input)."""
    enc = tiktoken_inc.get_encoding(name)
    for char in (" ", "a", "中"):
        small, large = long_runs[char, 20], long_runs[char, 26]
        assert enc.count_tokens(small, limit=1000, **config) is None
        work_small = fed_bytes(enc, small, 1000, config)
        work_large = fed_bytes(enc, large, 1000, config)
        assert work_large == work_small <= 4 << 20, (char, work_small, work_large)
        time_small = best_time(lambda: enc.count_tokens(small, limit=1000, **config))
        time_large = best_time(lambda: enc.count_tokens(large, limit=1000, **config))
        assert time_large <= 10 * time_small + 1e-3, (char, time_small, time_large)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("unit", [" ", "\n", "퀠", "😀", "<|"], ids=repr)
def test_unlimited_count_doubles_at_most(name, unit):
    """count_tokens without a limit on a pathological run: twice the input takes at most
    about twice the time (ratio <= 3, best of 7 after a call of each size, timings
    interleaved): no size has a cliff.  (A quadratic run is about 4 in every round; best of
    5 with no call before once went over 3 on a busy machine, 😀 with cl100k_base.)"""
    enc = tiktoken_inc.get_encoding(name)
    small = unit * ((2 << 20) // len(unit))
    large = small + small
    enc.count_tokens(small), enc.count_tokens(large)  # (the first calls of a size are slower)
    best_small = best_large = float("inf")
    for _ in range(7):
        best_small = min(best_small, best_time(lambda: enc.count_tokens(small), repeat=1))
        best_large = min(best_large, best_time(lambda: enc.count_tokens(large), repeat=1))
    assert best_large <= 3 * best_small, (best_small, best_large)


@pytest.mark.parametrize("name,unit", [("cl100k_base", b"!"), ("o200k_base", b"a"), ("o200k_base", b"A")])
def test_stream_long_run_is_linear(name, unit):
    """A run of one character or unit (one open piece) fed to the C stream in 1 KiB pieces:
    twice the input at most about doubles the time (ratio <= 3, best of 3; 1 and 2 MiB).  Each feed
    re-matches the open piece, so a scan that restarts from the piece's start, instead of
    resuming where the last one stopped, makes the run quadratic (o200k's letters: about 4
    per doubling)."""
    enc = tiktoken_inc.get_encoding(name)
    piece = unit * (1024 // len(unit))

    def feed(total_kib: int) -> None:
        stream = NativeStream(enc._core_bpe._vocab, enc._core_bpe._pattern)
        for _ in range(total_kib):
            stream.feed(piece)
        stream.finish()

    best_small = best_large = float("inf")
    for _ in range(3):
        best_small = min(best_small, best_time(lambda: feed(1024), repeat=1))
        best_large = min(best_large, best_time(lambda: feed(2048), repeat=1))
    assert best_large <= 3 * best_small, (best_small, best_large)


# --------------------------------------------------------------------------- a long str, read as far as needed


def fresh(text: str) -> str:
    """A new str equal to `text`, whose UTF-8 CPython has not made yet."""
    return (text + " ")[:-1]


def made_utf8(text: str) -> str:
    """A new str equal to `text` whose UTF-8 CPython has made and keeps (the calls then read
    that), unless the text has lone surrogates."""
    copy = fresh(text)
    with contextlib.suppress(UnicodeEncodeError):
        tiktoken_inc.get_encoding("r50k_base").encode_ordinary(copy)  # (CPython's UTF-8 of it, kept)
    return copy


#: Long texts (the calls read a str of at least 2**16 characters as they go) of each width of
#: a CPython str: 1, 2 and 4 bytes a character.
LONG_LINE = "The café’s naïve owner said: 中文 text, 1234 numbers — and 'more' words here.\n"
LONG_TEXTS = {
    "latin-1": "café naïve déjà vu, the quick brown fox; " * 2000,
    "2 bytes": LONG_LINE * 900,
    "4 bytes": (LONG_LINE + "😀 ") * 850,
}


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_capped_calls_make_no_utf8_of_the_whole_str(name):
    """count_tokens(limit=), truncate and encode(max_tokens=) on a fresh long str that is not
    ASCII read its UTF-8 only as far as the cap needs.  CPython makes the UTF-8 of all of a
    str on first use and keeps it in the str (a fresh 64 MiB str: all 64 MiB converted for a
    cap that reads 460 KB), which its size shows: sys.getsizeof counts the kept UTF-8."""
    enc = tiktoken_inc.get_encoding(name)

    def capped(text: str) -> None:
        with pytest.raises(TokenLimitError):
            enc.encode(text, max_tokens=1000)

    calls = {"count": lambda text: enc.count_tokens(text, limit=1000), "truncate": lambda text: enc.truncate(text, 1000),
             "max_tokens": capped}
    for kind, text in LONG_TEXTS.items():
        for what, call in calls.items():
            copy = fresh(text)
            size = sys.getsizeof(copy)
            call(copy)
            assert sys.getsizeof(copy) == size, (kind, what)


#: Characters next to ASCII stretches for the conversion of a fresh str: the ASCII edges, and
#: characters whose low byte alone would pass for ASCII (U+0141, U+4E41, U+10041).
STRETCH_NEIGHBOURS = {
    "latin-1": "\x00\x7f\x80\xe9\xff",
    "2 bytes": "\x7f\x80\u0141\u4e41\uff41",
    "4 bytes": "\x7f\u0141\u4e41\U00010041\U0001f642",
}


@pytest.mark.parametrize("kind", list(STRETCH_NEIGHBOURS))
def test_capped_calls_on_fresh_strs_of_ascii_stretches_of_every_length(kind):
    """A fresh str is converted sixteen ASCII characters at a time where it can be: ASCII
    stretches of every length from 1 to 40, between characters that end them (some whose low
    byte looks like ASCII), read as far as a cap needs, give the ids of the whole text's."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    rng = random.Random(kind)
    neighbours = STRETCH_NEIGHBOURS[kind]
    parts, size = [], 0
    while size < 1 << 17:
        stretch = "".join(rng.choice("ab z.\n\x7f") for _ in range(rng.randrange(1, 41)))
        part = stretch + "".join(rng.choice(neighbours) for _ in range(rng.randrange(1, 4)))
        parts.append(part)
        size += len(part)
    text = "".join(parts)
    ids = enc.encode_ordinary(text)
    for cap in (7, 5000, 30000, len(ids)):
        assert enc.count_tokens(fresh(text), limit=cap) == (len(ids) if len(ids) <= cap else None), cap
        tokens, prefix = enc.truncate(fresh(text), cap)
        assert tokens == ids[: len(tokens)] and text.startswith(prefix), cap
        assert enc.encode_ordinary(prefix) == tokens and len(tokens) <= cap, cap
    assert enc.truncate(fresh(text), len(ids)) == (ids, text)


@pytest.mark.parametrize("after", ["a", "\u00e9", "\ud800", "\U0001f642", "\uffff", "\ue000"])
def test_capped_calls_on_fresh_strs_of_three_byte_runs(after):
    """A run of three-byte characters is converted in a loop of its own, which ends at a
    character of another length, a lone surrogate (the call then takes the whole text as
    tiktoken makes it), or the end: capped calls on a fresh str answer as on one whose
    UTF-8 is made."""
    enc = tiktoken_inc.get_encoding("o200k_base")
    text = ("中文" * 7 + after + "\u0800\ud7ff\ue000" * 5 + " x") * 6000
    for cap in (5, 20_000, 10**9):
        assert outcome(enc.count_tokens, fresh(text), limit=cap) == outcome(enc.count_tokens, made_utf8(text), limit=cap)
        assert outcome(enc.truncate, fresh(text), cap) == outcome(enc.truncate, made_utf8(text), cap)


def long_variants(text: str) -> dict[str, str]:
    """`text` alone, and with a lone surrogate or a special token's text before the part a
    small cap reads or after it."""
    tail = text[:3000]
    return {
        "plain": text,
        "surrogate after": text + "\ud800" + tail,
        "surrogate before": "\udc00" + text,
        "special after": text + "<|endoftext|>" + tail,
        "special before": "<|endoftext|>" + text,
    }


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("kind", list(LONG_TEXTS))
def test_capped_calls_on_a_fresh_str_equal_tiktoken(name, kind, reference):
    """The calls that read a fresh str's UTF-8 as they go answer as the calls that read the
    UTF-8 CPython made of it, and as tiktoken: counts and caps around the count, and
    truncate from 0 to past the count, for texts of each str width with a lone surrogate (the
    call then takes the whole text, its surrogates replaced as tiktoken does) or a special
    token's text before or after what a small cap reads, in each special-token
    configuration."""
    enc, theirs = tiktoken_inc.get_encoding(name), reference(name)
    for variant, text in long_variants(LONG_TEXTS[kind]).items():
        for config_name, config in SPECIAL_CONFIGS.items():
            where = (variant, config_name)
            expected = outcome(theirs.encode, text, **{"disallowed_special": "all", **config})
            full = expected[1] if expected[0] == "ok" else None
            count = len(full) if full is not None else None
            caps = {0, 1, 1000} | ({count - 1, count, count + 1} if count is not None else set())
            for cap in sorted(caps):
                read = made_utf8(text)
                counted = outcome(enc.count_tokens, fresh(text), limit=cap, **config)
                assert counted == outcome(enc.count_tokens, read, limit=cap, **config), (where, cap)
                if full is not None:
                    assert counted == ("ok", count if count <= cap else None), (where, cap)
                truncated = outcome(enc.truncate, fresh(text), cap, **config)
                assert truncated == outcome(enc.truncate, read, cap, **config), (where, cap)
                if full is not None:
                    tokens, prefix = truncated[1]
                    assert len(tokens) <= cap and tokens == full[: len(tokens)] and text.startswith(prefix)
                    assert theirs.encode(prefix, **{"disallowed_special": "all", **config}) == tokens, (where, cap)
                    if count <= cap:
                        assert (tokens, prefix) == (full, text), (where, cap)
                for_max = outcome(enc.encode, fresh(text), max_tokens=cap, **config)
                assert for_max == outcome(enc.encode, read, max_tokens=cap, **config), (where, cap)
                if full is not None and count <= cap:
                    assert for_max == ("ok", full), (where, cap)


# --------------------------------------------------------------------------- one-shot forms
# Bounded calls that must read the whole text anyway (no limit, a limit the text cannot pass,
# or a text of at most 1 KiB) encode it in one shot below 1 MiB of UTF-8, and the default
# count_tokens is one C call; longer texts and texts with refused special-token text go
# through the stream.  Each form is checked against tiktoken itself.

ONE_SHOT_BYTES = 1 << 20
LIMIT_ARGS = [None, 0, 1, 5, 1000, 10**9]


@pytest.mark.parametrize("name", MAIN_ENCODINGS)
@settings(max_examples=100)
@given(text=TEXTS)
def test_one_shot_count_against_tiktoken(name, encoding, reference, text):
    """count_tokens with the default arguments and with limits, and encode(max_tokens=), on
    short texts: tiktoken's len(encode(text)) (its ValueError for special-token text)."""
    enc, theirs = encoding(name), reference(name)
    expected = outcome(theirs.encode, text)
    for limit in LIMIT_ARGS:
        got = outcome(enc.count_tokens, text, limit=limit)
        if expected[0] != "ok":
            assert got == expected or (limit is not None and got == ("ok", None)), (text, limit, got)
            continue
        count = len(expected[1])
        assert got == ("ok", count if limit is None or count <= limit else None), (text, limit)
        for config in SPECIAL_CONFIGS.values():
            want = outcome(theirs.encode, text, **config)
            if want[0] == "ok":
                fits = limit is None or len(want[1]) <= limit
                assert enc.count_tokens(text, limit=limit, **config) == (len(want[1]) if fits else None)
                if fits:
                    assert enc.encode(text, max_tokens=limit, **config) == want[1]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "custom"])
def test_one_shot_count_edges(name, get_enc, encoding, reference):
    """Empty text, lone surrogates, special-token text (encode's ValueError, word for word),
    and texts either side of where the one-shot form gives way to the stream."""
    enc = get_enc(name)
    theirs = reference(name if name != "custom" else "cl100k_base")
    assert callable(enc._count_default)  # the default count is one C call (a compiled pattern too)
    assert enc.count_tokens("") == 0 and enc.count_tokens("", limit=0) == 0
    for text in ("a\ud800b", "\udfff", "\ud83d\ude00 \ud83d", "x" * 2000 + "\ud800"):
        if name != "custom":
            assert enc.count_tokens(text) == len(theirs.encode(text)), text[:20]
        assert enc.count_tokens(text) == len(enc.encode(text)), text[:20]
        assert enc.count_tokens(text, limit=0) is None
    for text in ("<|endoftext|>", "hi <|endoftext|> there", "x" * 5000 + "<|endoftext|>"):
        error = outcome(enc.encode, text)
        assert error[0] is ValueError
        assert outcome(enc.count_tokens, text) == error
        assert outcome(enc.count_tokens, text, limit=10**6) == error
        assert outcome(enc.count_tokens, text, allowed_special={"<|fim_prefix|>"}) == error
    ordinary = enc if name == "custom" else theirs
    assert enc.count_tokens("hi <|endoftext|>", disallowed_special=()) == len(
        ordinary.encode("hi <|endoftext|>", disallowed_special=())
    )
    unit = "héllo wörld, 中文 😀 123 " if name != "custom" else "hello world "
    base = unit * (ONE_SHOT_BYTES // len(unit.encode()) + 2)
    for size in (ONE_SHOT_BYTES - 1, ONE_SHOT_BYTES, ONE_SHOT_BYTES + 1, ONE_SHOT_BYTES + 3):
        text = base.encode()[:size].decode("utf-8", "ignore")
        count = len(enc.encode_ordinary(text))
        assert enc.count_tokens(text) == count, size
        assert enc.count_tokens(text, limit=count) == count and enc.count_tokens(text, limit=count - 1) is None
        assert enc.count_tokens(text, allowed_special="all") == count


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "custom"])
@settings(max_examples=60)
@given(text=TEXTS)
def test_truncate_whole_text_fits(name, get_enc, text):
    """truncate(text, n) with n at least the text's bytes (the whole text, in one shot):
    the text and encode's ids, or encode's ValueError; lone surrogates included."""
    enc = get_enc(name)
    for extra in ("", "\ud800", "\udc00x"):
        subject = text + extra
        n = len(subject.encode("utf-8", "surrogatepass"))
        for config in SPECIAL_CONFIGS.values():
            expected = outcome(enc.encode, subject, **config)
            got = outcome(enc.truncate, subject, n, **config)
            assert got == (expected if expected[0] != "ok" else ("ok", (expected[1], subject))), (subject, config)


@pytest.mark.parametrize("bad", [-1, True, 1.0, "5"])
def test_one_shot_count_bad_limits(bad):
    """A limit that is no int >= 0 raises ValueError, as before the one-C-call form."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    with pytest.raises(ValueError):
        enc.count_tokens("hello", limit=bad)


@pytest.mark.parametrize("huge", [2**62, 2**63, 2**64 - 1, 2**64, 10**30])
@pytest.mark.parametrize("config", [{}, {"disallowed_special": ()}, {"allowed_special": "all"}])
def test_huge_limits_are_no_limit(huge, config):
    """A limit past what any text can reach (up to 64 bits and beyond) is no limit at all for
    count_tokens, encode(max_tokens=) and truncate, on both the one-call and the stream
    forms (the special-token arguments choose the form), never an OverflowError."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    for text in ("hello world", "x" * 3000 + " y" * 2000):
        ids = enc.encode(text, **config)
        assert enc.count_tokens(text, limit=huge, **config) == len(ids)
        assert enc.encode(text, max_tokens=huge, **config) == ids
        assert enc.truncate(text, huge, **config) == (ids, text)


def test_one_shot_count_non_str_and_changed_specials():
    """A non-str raises TypeError; a changed special_tokens_set is read afresh (the default
    form applies only to the set as built)."""
    enc = Encoding("cl100k_changed", pat_str=tiktoken_inc.get_encoding("cl100k_base")._pat_str,
                   mergeable_ranks=tiktoken_inc.get_encoding("cl100k_base")._mergeable_ranks,
                   special_tokens={"<|endoftext|>": 100257, "<|endofprompt|>": 100276})
    with pytest.raises(TypeError):
        enc.count_tokens(b"hello")
    assert enc.count_tokens("a<|endofprompt|>b", disallowed_special=()) == len(enc.encode_ordinary("a<|endofprompt|>b"))
    with pytest.raises(ValueError, match="endofprompt"):
        enc.count_tokens("a<|endofprompt|>b")
    enc.special_tokens_set.discard("<|endofprompt|>")  # as tiktoken: the plain set decides
    assert enc.count_tokens("a<|endofprompt|>b") == len(enc.encode("a<|endofprompt|>b"))
    with pytest.raises(ValueError, match="endoftext"):
        enc.count_tokens("a<|endoftext|>b")


@pytest.mark.parametrize("pretokenize", [True, False])
def test_one_shot_count_threads(pretokenize):
    """Threads counting on one Encoding at once (short texts and texts past the one-shot
    bound, with and without limits) each get their own text's count."""
    import threading

    enc = tiktoken_inc.get_encoding("cl100k_base", pretokenize=pretokenize)
    texts = [("word%d " % i) * (i * 37 + 1) for i in range(12)] + ["b " * (ONE_SHOT_BYTES // 2 + 7)]
    counts = [len(enc.encode(text)) for text in texts]
    failures = []

    def work(offset):
        for round_ in range(20):
            k = (offset + round_) % len(texts)
            limit = None if round_ % 2 else counts[k]
            if enc.count_tokens(texts[k], limit=limit) != counts[k]:
                failures.append((offset, k))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
