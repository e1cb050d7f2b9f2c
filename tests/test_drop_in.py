"""Places where code written for tiktoken used to see a difference (issue: drop-in everywhere).

Each test compares with tiktoken itself, or states the rule where tiktoken has none.
"""
from __future__ import annotations

import inspect
import pickle
from unittest import mock

import numpy as np
import pytest
import tiktoken

import tiktoken_inc
import tiktoken_inc.load

SINGLE_BYTES = {bytes([b]): b for b in range(256)}


def test_mergeable_ranks_is_a_dict(reference):
    """A bundled encoding's `_mergeable_ranks` is a dict, as tiktoken's: copied, merged,
    passed to tiktoken.Encoding."""
    enc = tiktoken_inc.get_encoding("r50k_base")
    ranks = enc._mergeable_ranks
    assert type(ranks) is dict
    assert ranks == reference("r50k_base")._mergeable_ranks
    assert ranks.copy() == dict(ranks) and len(ranks | {b"not a token!": 50257}) == len(ranks) + 1
    rebuilt = tiktoken.Encoding("again", pat_str=enc._pat_str, mergeable_ranks=ranks, special_tokens={})
    assert rebuilt.encode("hello world") == enc.encode("hello world")
    assert pickle.loads(pickle.dumps(enc)).encode("hi") == enc.encode("hi")


def test_encode_ordinary_is_a_method():
    """mock.patch.object on the class reaches instances; inspect.signature works."""
    enc = tiktoken_inc.get_encoding("cl100k_base")
    assert str(inspect.signature(enc.encode_ordinary)) == "(text: 'str') -> 'list[int]'"
    with mock.patch.object(tiktoken_inc.Encoding, "encode_ordinary", return_value=[42]) as patched:
        assert enc.encode_ordinary("hello") == [42]
    patched.assert_called_once_with("hello")
    assert enc.encode_ordinary("hello") == [15339]


def test_encode_to_numpy_is_read_only(reference):
    ours = tiktoken_inc.get_encoding("cl100k_base").encode_to_numpy("hello world")
    theirs = reference("cl100k_base").encode_to_numpy("hello world")
    assert ours.flags.writeable == theirs.flags.writeable == False  # noqa: E712
    with pytest.raises(ValueError):
        ours[0] = 1
    assert np.array_equal(ours, theirs)


def _outcome(call):
    try:
        return "ok", call()
    except BaseException as error:  # tiktoken's Rust panics are BaseExceptions
        return type(error).__name__, None


ARGUMENTS = [
    dict(allowed_special=None),
    dict(allowed_special=None, disallowed_special=()),
    dict(allowed_special=("x",), disallowed_special=()),
    dict(allowed_special=(), disallowed_special="all"),
    dict(disallowed_special={""}),
    dict(disallowed_special={"\ud800"}),
    dict(allowed_special="all", disallowed_special={"<|endoftext|>"}),
]
TEXTS = ["hi <|endoftext|> x", "a\ud800b", "plain", ""]


@pytest.mark.parametrize("arguments", ARGUMENTS, ids=repr)
def test_arguments_as_tiktoken_takes_them(arguments, reference):
    """encode, encode_with_unstable, encode_to_numpy and the stream encoder raise what
    tiktoken's encode methods raise, or give the same ids."""
    ours, theirs = tiktoken_inc.get_encoding("cl100k_base"), reference("cl100k_base")

    def stream(text):
        encoder = ours.stream_encoder(**arguments)
        return encoder.feed(text) + encoder.finish()

    for text in TEXTS:
        expected = _outcome(lambda: theirs.encode(text, **arguments))
        assert _outcome(lambda: ours.encode(text, **arguments)) == expected
        assert _outcome(lambda: stream(text)) == expected
        assert _outcome(lambda: ours.encode_with_unstable(text, **arguments)[0]) == _outcome(
            lambda: theirs.encode_with_unstable(text, **arguments)[0]
        )
        assert _outcome(lambda: ours.encode_to_numpy(text, **arguments).tolist()) == _outcome(
            lambda: theirs.encode_to_numpy(text, **arguments).tolist()
        )


def test_stream_finds_a_disallowed_lone_surrogate_across_chunks():
    enc = tiktoken_inc.get_encoding("cl100k_base")
    encoder = enc.stream_encoder(disallowed_special={"x\ud800"})
    encoder.feed("abc x")
    with pytest.raises(ValueError, match="disallowed special token"):
        encoder.feed("\ud800 more")


def _message(call) -> str:
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


def test_error_messages_as_tiktoken(reference):
    ours, theirs = tiktoken_inc.get_encoding("cl100k_base"), reference("cl100k_base")
    for method in ("encode_ordinary_batch", "encode_batch", "decode_batch"):
        arguments = [[1, 2]] if method == "decode_batch" else ["a b"]
        assert _message(lambda: getattr(ours, method)(arguments, num_threads=0)) == _message(
            lambda: getattr(theirs, method)(arguments, num_threads=0)
        )
    bad = dict(pat_str="(unclosed", mergeable_ranks=SINGLE_BYTES, special_tokens={})
    assert _message(lambda: tiktoken_inc.Encoding("bad", **bad)) == _message(lambda: tiktoken.Encoding("bad", **bad))


def test_heal_with_a_special_token_that_begins_another():
    """A last special token whose text begins a longer special token's is healed with what
    follows it (a continuation may still make that token of it); otherwise it stays."""
    enc = tiktoken_inc.Encoding(
        "toy", pat_str=None, mergeable_ranks=SINGLE_BYTES,
        special_tokens={"<|a|>": 256, "<|a|>bc": 257, "<|c|>": 258},
    )
    for prompt, expected in [
        ("x<|a|>", ([], "x<|a|>")),
        ("x<|a|>b", ([], "x<|a|>b")),  # "c" would make <|a|>bc of it
        ("x<|a|>c", ([enc.encode_single_token("x"), 256], "c")),
        ("x<|c|>", ([enc.encode_single_token("x"), 258], "")),
        ("y<|c|>x<|a|>", ([121, 258], "x<|a|>")),
    ]:
        tokens = enc.encode(prompt, allowed_special="all")
        kept, rest = enc.heal(tokens)
        assert (kept, rest) == expected, prompt
        for more in ("", "b", "bc", "c", "z"):  # the promise: kept tokens start every continuation
            assert enc.encode(prompt + more, allowed_special="all")[: len(kept)] == kept


def test_load_has_tiktokens_helpers(tmp_path):
    import tiktoken.load

    for name in ("data_gym_to_mergeable_bpe_ranks", "dump_tiktoken_bpe", "read_file", "read_file_cached", "check_hash"):
        assert getattr(tiktoken_inc.load, name) is getattr(tiktoken.load, name)
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(b"YQ== 0\nYg== 1\n")
    assert tiktoken_inc.load.read_file(str(path)) == path.read_bytes()
    assert tiktoken_inc.load.check_hash(b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_list_encoding_names_in_tiktokens_order(monkeypatch):
    """With another plugin installed, the names come in tiktoken's order."""
    import types

    import tiktoken.registry

    plugin = types.ModuleType("tiktoken_ext.aaa_plugin")
    plugin.ENCODING_CONSTRUCTORS = {"aaa_encoding": lambda: {}}
    original = tiktoken.registry._available_plugin_modules
    monkeypatch.setitem(__import__("sys").modules, "tiktoken_ext.aaa_plugin", plugin)
    monkeypatch.setattr(tiktoken.registry, "_available_plugin_modules", lambda: ["tiktoken_ext.aaa_plugin", *original()])
    monkeypatch.setattr(tiktoken.registry, "ENCODING_CONSTRUCTORS", None)
    try:
        assert tiktoken_inc.list_encoding_names() == tiktoken.list_encoding_names()
        assert tiktoken_inc.list_encoding_names()[0] == "aaa_encoding"
    finally:
        tiktoken.registry.ENCODING_CONSTRUCTORS = None
