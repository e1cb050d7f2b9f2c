"""Special tokens found in C (csrc/special_tokens.c) against tiktoken 0.14 and a naive search.

tiktoken cuts text at allowed special tokens with a regex alternation (leftmost match) and
refuses disallowed ones with another (the error names the leftmost).  Where two tokens start
at the same position (one a prefix of the other) tiktoken's choice follows a hash map's or
a set's iteration order; tiktoken_inc takes the longest.  Every comparison with tiktoken
here avoids such ties; the tie rule itself is checked against a naive search.

Covered: every bundled encoding with specials at the start, the end, adjacent, inside
broken specials and after partial prefixes; allowed subsets, "all", disallowed messages,
`disallowed_special=()`; the three output forms (list, numpy, unstable); custom patterns
(split in Python), encodings without pre-splitting, custom overlapping specials; lone
surrogates; hypothesis texts mixing specials and ordinary text; the matcher cache; and
that a megabyte of "<|" costs about four times a quarter megabyte.
"""
from __future__ import annotations

import random
import threading

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc
from support import ALL_ENCODINGS, best_time
from tiktoken_inc._native import SpecialMatcher
from tiktoken_inc.core import first_special_in


def outcome(call):
    """('ok', result) or ('raise', exception type, args)."""
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - the exception is the result being compared
        return ("raise", type(exc), exc.args)
    if hasattr(result, "tolist"):
        result = result.tolist()
    return ("ok", result)


def naive_matches(tokens, text):
    """Leftmost, then longest, non-overlapping occurrences: [(start, token)]."""
    ordered = sorted(tokens, key=len, reverse=True)
    found, position = [], 0
    while position < len(text):
        for token in ordered:
            if token and text.startswith(token, position):
                found.append((position, token))
                position += len(token)
                break
        else:
            position += 1
    return found


def sampled_specials(enc, count=12, seed=0):
    """The specials of `enc`, or a fixed sample of them for o200k_harmony's thousand."""
    specials = sorted(enc.special_tokens_set)
    if len(specials) <= count:
        return specials
    named = [s for s in specials if "reserved" not in s]
    return named[: count // 2] + random.Random(seed).sample(specials, count - count // 2)


def tricky_texts(specials):
    """Specials at the start, the end, adjacent, after partial prefixes, broken, nested."""
    texts = []
    for special in specials:
        texts += [
            special,
            special + special,
            f"{special}x{special}",
            f" {special} ",
            f"hello{special}",
            f"{special}world",
            special[:-1] + special,  # "<|endoftext|" + "<|endoftext|>"
            special[:5] + special,  # "<|end" + ...
            special + special[2:],
            "<|" * 3 + special + "|>" * 3,
            special[:-2] + "\n" + special,
            f"a  {special}  \n\n{special}\t",
            f"don't{special}'s",
            f"123{special}4567",
            "\u4e2d\u6587" + special + "\U0001f600",
        ]
    texts += ["".join(specials), " ".join(specials), "\n".join(reversed(specials)), "<|", "|>", ""]
    return texts


@pytest.fixture(scope="module", params=ALL_ENCODINGS)
def pair(request, encoding, reference):
    """(ours, tiktoken's) for one encoding name."""
    return encoding(request.param), reference(request.param)


# --------------------------------------------------------------------------- bundled encodings
def test_allowed_specials_match_tiktoken(pair):
    """encode with "all", each single special, subsets and the empty set: as tiktoken."""
    ours, theirs = pair
    specials = sampled_specials(theirs)
    allowed_sets = ["all", set(), frozenset(specials[:1]), set(specials[1:3]), set(specials[::2])]
    allowed_sets += [{special} for special in specials[:4]]
    for text in tricky_texts(specials):
        for allowed in allowed_sets:
            kwargs = {"allowed_special": allowed, "disallowed_special": ()}
            assert ours.encode(text, **kwargs) == theirs.encode(text, **kwargs), (text, allowed)
            assert outcome(lambda: ours.encode(text, allowed_special=allowed)) == outcome(
                lambda: theirs.encode(text, allowed_special=allowed)
            ), (text, allowed)


def test_output_forms_match_tiktoken(pair):
    """encode_to_numpy and encode_with_unstable cut at the same specials as encode."""
    ours, theirs = pair
    specials = sampled_specials(theirs, 4)
    for text in tricky_texts(specials)[::3]:
        for allowed in ("all", set(specials[:1])):
            kwargs = {"allowed_special": allowed, "disallowed_special": ()}
            assert ours.encode_to_numpy(text, **kwargs).tolist() == theirs.encode_to_numpy(text, **kwargs).tolist()
            mine, theirs_unstable = ours.encode_with_unstable(text, **kwargs), theirs.encode_with_unstable(text, **kwargs)
            assert mine[0] == theirs_unstable[0], (text, allowed)
            assert sorted(mine[1]) == sorted(theirs_unstable[1]), (text, allowed)


def test_disallowed_message_names_the_leftmost(pair):
    """The ValueError names the leftmost disallowed special, with tiktoken's exact text."""
    ours, theirs = pair
    specials = sampled_specials(theirs, 6)
    for text in tricky_texts(specials):
        for allowed in (set(), set(specials[:1]), set(specials[1:])):
            for disallowed in ("all", set(specials[2:4])):
                a = outcome(lambda: ours.encode(text, allowed_special=allowed, disallowed_special=disallowed))
                b = outcome(lambda: theirs.encode(text, allowed_special=allowed, disallowed_special=disallowed))
                assert a == b, (text, allowed, disallowed)


def test_disallowed_inside_an_allowed_special_raises(encoding, reference):
    """The check searches the whole text, even inside an allowed token's text (as tiktoken)."""
    ours, theirs = encoding("cl100k_base"), reference("cl100k_base")
    text = "x<|endoftext|>y"
    for disallowed in ({"endoftext"}, {"|>"}, {"<|end", "oftext"}, {"y", "x"}):
        a = outcome(lambda: ours.encode(text, allowed_special="all", disallowed_special=disallowed))
        b = outcome(lambda: theirs.encode(text, allowed_special="all", disallowed_special=disallowed))
        assert a == b and a[0] == "raise", disallowed


def test_disallowed_edge_sets(encoding, reference):
    """Empty strings, non-special strings and non-str members of disallowed_special."""
    ours, theirs = encoding("cl100k_base"), reference("cl100k_base")
    cases = [
        ("", {""}),
        ("abc", {""}),
        ("abc", {"bc"}),
        ("hello world", {"world", "hello world!"}),
        ("a\ud800b", {"\ud800"}),
        ("a\ud800b<|endoftext|>", "all"),
        ("a\ud83d\ude00b", {"\ud83d\ude00"}),
        ("a\U0001f600b", {"\ud83d\ude00"}),
        ("abc", {1}),
        (123, "all"),
    ]
    for text, disallowed in cases:
        a = outcome(lambda: ours.encode(text, disallowed_special=disallowed))
        b = outcome(lambda: theirs.encode(text, disallowed_special=disallowed))
        if a[0] == "raise" and a[1] is TypeError:
            assert b[0] == "raise" and b[1] is TypeError, (ascii(text), disallowed)
        else:
            assert a == b, (ascii(text), disallowed)


def test_surrogates_with_specials(pair):
    """Lone surrogates beside allowed specials take tiktoken's replacement path."""
    ours, theirs = pair
    special = sampled_specials(theirs, 1)[0]
    for text in [f"\ud800{special}", f"{special}\udfff", f"a\ud83d\ude00{special}b\ud800", f"\ud800{special}{special}"]:
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), ascii(text)
        assert outcome(lambda: ours.encode(text)) == outcome(lambda: theirs.encode(text)), ascii(text)


def test_batch_and_threads(encoding, reference):
    """encode_batch with specials, and many threads sharing the matcher cache."""
    ours, theirs = encoding("cl100k_base"), reference("cl100k_base")
    specials = sorted(theirs.special_tokens_set)
    texts = tricky_texts(specials)
    assert ours.encode_batch(texts, allowed_special="all") == theirs.encode_batch(texts, allowed_special="all")
    allowed_sets = [frozenset(specials[: k + 1]) for k in range(len(specials))]
    want = {(text, allowed): theirs.encode(text, allowed_special=allowed, disallowed_special=())
            for text in texts for allowed in allowed_sets}
    errors = []

    def work(seed):
        rng = random.Random(seed)
        for _ in range(300):
            text, allowed = rng.choice(list(want))
            got = ours.encode(text, allowed_special=set(allowed), disallowed_special=())
            if got != want[text, allowed]:
                errors.append((text, allowed))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


# --------------------------------------------------------------------------- custom encodings
def custom_pair(reference, pat_str, special_tokens, pretokenize=None):
    """(ours, tiktoken's) over r50k's ranks with other specials and pattern."""
    base = reference("r50k_base")
    ranks = base._mergeable_ranks
    special_tokens = {text: 50257 + k for k, text in enumerate(special_tokens)}
    kwargs = {} if pretokenize is None else {"pretokenize": pretokenize}
    ours = tiktoken_inc.Encoding(
        "custom-specials", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens, **kwargs
    )
    theirs = tiktoken.Encoding("custom-specials", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens)
    return ours, theirs


#: Specials that overlap (but none is a prefix of another: tiktoken's order is then moot).
OVERLAPPING = ["<|a|>", "|>b", "a|", "<|ab|>", "b<|", "[x]"]
OVERLAP_TEXTS = ["<|a|>b<|ab|>", "b<|a|>", "<|ab|>b<|", "[x][x]a|>", "<|a<|a|>|>b", "xa|b<|ab|>b", "", "plain"]


@pytest.mark.parametrize("pat_str", [r"\S+|\s+", r"'s|\w+|[^\w\s]+|\s+(?!\S)|\s+"], ids=["S+", "words"])
def test_custom_pattern_fallback(reference, pat_str):
    """A pattern the C pre-splitter does not know: split in Python, cut at the C matches."""
    ours, theirs = custom_pair(reference, pat_str, OVERLAPPING)
    assert ours._core_bpe._native_pattern is None
    for text in OVERLAP_TEXTS + tricky_texts(OVERLAPPING)[::4]:
        for allowed in ("all", {"<|a|>"}, {"|>b", "b<|"}, set()):
            kwargs = {"allowed_special": allowed, "disallowed_special": ()}
            assert ours.encode(text, **kwargs) == theirs.encode(text, **kwargs), (text, allowed)
            assert ours.encode_to_numpy(text, **kwargs).tolist() == theirs.encode(text, **kwargs)
            assert outcome(lambda: ours.encode(text, allowed_special=allowed)) == outcome(
                lambda: theirs.encode(text, allowed_special=allowed)
            ), (text, allowed)


def test_builtin_pattern_custom_specials(reference):
    """tiktoken's r50k pattern (the one-call C path) with overlapping custom specials."""
    ours, theirs = custom_pair(reference, reference("r50k_base")._pat_str, OVERLAPPING)
    assert ours._core_bpe._native_pattern is not None
    for text in OVERLAP_TEXTS + tricky_texts(OVERLAPPING):
        for allowed in ("all", {"<|a|>"}, {"|>b", "b<|", "[x]"}, set()):
            kwargs = {"allowed_special": allowed, "disallowed_special": ()}
            assert ours.encode(text, **kwargs) == theirs.encode(text, **kwargs), (text, allowed)
            assert outcome(lambda: ours.encode(text, allowed_special=allowed)) == outcome(
                lambda: theirs.encode(text, allowed_special=allowed)
            ), (text, allowed)


def test_no_pretokenize_cuts_at_specials(encoding, reference):
    """pretokenize=False: each stretch between specials is one piece (C, pattern 0)."""
    ours, theirs = encoding("cl100k_base", pretokenize=False), reference("cl100k_base")
    assert ours._core_bpe._native_pattern == 0
    specials = sorted(theirs.special_tokens_set)
    for text in tricky_texts(specials)[::2]:
        for allowed in ("all", {specials[0]}):
            tokens = specials if allowed == "all" else sorted(allowed)
            want, position = [], 0
            for start, token in naive_matches(tokens, text):
                want += theirs._encode_single_piece(text[position:start]) if start > position else []
                want.append(theirs._special_tokens[token])
                position = start + len(token)
            want += theirs._encode_single_piece(text[position:]) if position < len(text) else []
            assert ours.encode(text, allowed_special=allowed, disallowed_special=()) == want, (text, allowed)


def test_prefix_related_specials_take_the_longest(reference):
    """Where one special is a prefix of another, the longer wins (tiktoken: hash order)."""
    ours, _ = custom_pair(reference, reference("r50k_base")._pat_str, ["<|a|>", "<|a|>b", "q", "qq", "qqq"])
    ids = ours._special_tokens
    assert ours.encode("<|a|>b", allowed_special="all") == [ids["<|a|>b"]]
    assert ours.encode("<|a|>", allowed_special="all") == [ids["<|a|>"]]
    assert ours.encode("qqqqq", allowed_special="all") == [ids["qqq"], ids["qq"]]
    only_short = {"allowed_special": {"<|a|>"}, "disallowed_special": ()}
    assert ours.encode("<|a|>b", **only_short) == [ids["<|a|>"], ours.encode_ordinary("b")[0]]
    with pytest.raises(ValueError, match="'<\\|a\\|>b'"):
        ours.encode("x<|a|>b")
    assert first_special_in(frozenset({"", "ab", "abc"}), "abcd") == "abc"
    assert first_special_in(frozenset({"", "ab"}), "xab") == ""


# --------------------------------------------------------------------------- the matcher
@given(
    st.lists(st.text("ab<|>", min_size=1, max_size=6), min_size=0, max_size=8, unique=True),
    st.text("ab<|>x", max_size=80),
    st.integers(0, 10),
)
@settings(max_examples=400)
def test_matcher_equals_naive_search(tokens, text, start):
    """find_all and find (leftmost, then longest) equal a naive search, from any start."""
    data = text.encode()
    start = min(start, len(data))
    matcher = SpecialMatcher([token.encode() for token in tokens])
    want = [(position + start, tokens.index(token)) for position, token in naive_matches(tokens, text[start:])]
    assert matcher.find_all(data, start) == want
    assert matcher.find(data, start) == (want[0] if want else None)


def test_matcher_cache(encoding):
    """One matcher per distinct allowed set, shared by equal sets; the cache is bounded."""
    core = encoding("cl100k_base")._core_bpe
    first = core._matcher({"<|endoftext|>", "unknown"})
    assert core._matcher(frozenset({"unknown", "<|endoftext|>"})) is first
    assert first.strings == (b"<|endoftext|>",)
    assert core._matcher(set()) is None and core._matcher({"not special"}) is None
    for k in range(200):
        core._matcher({f"<|x{k}|>"})
    assert len(core._matchers) <= 64
    with pytest.raises(TypeError):
        core._matcher({1})
    with pytest.raises(TypeError):
        core._matcher(["<|endoftext|>"])


# --------------------------------------------------------------------------- random texts
FRAGMENTS = ["<|", "|>", "<|endoftext", "endoftext|>", "<|fim_", " ", "\n", "'s", "12", "\u00e9", "\U0001f600"]


@st.composite
def special_texts(draw, specials):
    parts = draw(st.lists(st.one_of(st.sampled_from(specials + FRAGMENTS), st.text(max_size=8)), max_size=12))
    return "".join(parts)


@pytest.mark.parametrize("name", ALL_ENCODINGS)
def test_random_texts_match_tiktoken(name, encoding, reference):
    """Hypothesis texts of specials, their fragments and random text, several allowed sets."""
    ours, theirs = encoding(name), reference(name)
    specials = sampled_specials(theirs, 8)

    @given(special_texts(specials), st.sampled_from(["all", "none", "first", "half"]))
    @settings(max_examples=60)
    def check(text, which):
        allowed = {"all": "all", "none": set(), "first": {specials[0]}, "half": set(specials[::2])}[which]
        kwargs = {"allowed_special": allowed, "disallowed_special": ()}
        assert ours.encode(text, **kwargs) == theirs.encode(text, **kwargs)
        assert outcome(lambda: ours.encode(text, allowed_special=allowed)) == outcome(
            lambda: theirs.encode(text, allowed_special=allowed)
        )

    check()


# --------------------------------------------------------------------------- linear time
def test_hostile_input_is_linear(encoding):
    """A mebibyte of "<|" (one special at the very end) costs about four times a quarter
    mebibyte, for the allowed cut and for the disallowed check (ratio <= 8 where linear
    is 4; a search quadratic in the text would give 16)."""
    enc = encoding("o200k_harmony")  # a thousand specials, all starting with "<|"
    small, large = "<|" * (1 << 17) + "<|endoftext|>", "<|" * (1 << 19) + "<|endoftext|>"
    assert enc.encode(small, allowed_special="all")[-1] == enc.eot_token
    with pytest.raises(ValueError, match="<\\|endoftext\\|>"):
        enc.encode(small)
    ratios = []
    for call in (
        lambda text: enc.encode(text, allowed_special="all"),
        lambda text: first_special_in(enc._all_special, text),
    ):
        ratios.append(best_time(lambda: call(large)) / best_time(lambda: call(small)))
    assert all(ratio <= 8 for ratio in ratios), ratios


def test_search_does_not_rescan(reference):
    """Against {"a", "a" * m + "b"}, a run of "a" is a special at every byte, and a forward
    search would look m bytes ahead after each one: here m = 4000 costs about what m = 40
    does (ratio <= 4; rescanning would give about 100)."""
    text = "a" * (1 << 18)
    times = []
    for m in (40, 4000):
        ours, _ = custom_pair(reference, reference("r50k_base")._pat_str, ["a", "a" * m + "b"])
        assert ours.encode(text[:100], allowed_special="all") == [ours._special_tokens["a"]] * 100
        times.append(best_time(lambda: ours.encode(text, allowed_special="all")))
    assert times[1] <= 4 * times[0], times


def test_disallowed_follows_a_changed_special_tokens_set(reference):
    """"all" disallows `special_tokens_set - allowed` even after the set was changed (the
    per-allowed-set cache steps aside), as in tiktoken."""
    ours, theirs = custom_pair(reference, reference("r50k_base")._pat_str, ["<|a|>", "<|b|>"])
    assert outcome(lambda: ours.encode("x zz")) == outcome(lambda: theirs.encode("x zz")) == ("ok", ours.encode_ordinary("x zz"))
    for enc in (ours, theirs):
        enc.special_tokens_set.add("zz")
    for text in ("x zz", "<|a|>", "zz<|b|>"):
        for allowed in (frozenset(), frozenset({"<|a|>"}), "all"):
            a = outcome(lambda: ours.encode(text, allowed_special=allowed))
            b = outcome(lambda: theirs.encode(text, allowed_special=allowed))
            assert a == b, (text, allowed)
