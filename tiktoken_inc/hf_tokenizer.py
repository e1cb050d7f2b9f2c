"""Hugging Face `tokenizer.json` files with byte-level BPE, as tiktoken-style Encodings.

A tokenizer.json is taken where tiktoken's semantics give exactly what Hugging Face's
`tokenizers` gives, and refused (ValueError, saying why) elsewhere:
- the model is BPE over GPT-2's byte-to-character alphabet (no byte fallback, dropout,
  unknown token or word prefixes/suffixes), with every single byte in the vocabulary;
- the merges are in the order of the ids they make, each makes a token that tiktoken's BPE
  makes from its bytes, and every longer token tiktoken's BPE makes is made by a merge (so
  lowest id first, as tiktoken merges, is the merges' order); a token no merge makes may come
  out only through the whole-piece shortcut, which the file must ask for (`ignore_merges`);
- the pre-tokenizer is ByteLevel alone (its GPT-2 pattern) or one regex Split (Isolated)
  then ByteLevel without its regex, and the pattern matches at every position (Isolated keeps
  the text between matches as pieces; tiktoken drops it);
- the normalizer is none or NFC (then applied before encoding: `NormalizedEncoding`).
The added tokens become special tokens (`encode(text, allowed_special="all")` splits them out,
as `tokenizers` does).  Post-processing (a BOS token) is not applied: ids are the text's own.

```
>>> from tiktoken_inc.open_models import load_tokenizer
>>> load_tokenizer("Qwen2-7B/tokenizer.json").encode("hello world")  # doctest: +SKIP
[14990, 1879]
```
"""
from __future__ import annotations

import functools
import unicodedata
from pathlib import Path
from typing import Any, AbstractSet, Collection, Literal

from tiktoken_inc.core import Encoding

#: ByteLevel's own pattern (GPT-2's), when it splits with its regex.
BYTE_LEVEL_PAT_STR = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's alphabet: the character that stands for each byte in a byte-level vocabulary."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def _token_bytes(text: str, where: str) -> bytes:
    decoder = _byte_decoder()
    try:
        return bytes(decoder[c] for c in text)
    except KeyError as error:
        raise ValueError(f"{where}: the token {text!r} has a character outside the byte-level alphabet "
                         f"({error.args[0]!r}): not a byte-level BPE vocabulary") from None


class NormalizedEncoding(Encoding):
    """An Encoding that normalizes text (Unicode NFC) before encoding it, as a tokenizer.json
    with an NFC normalizer does.  The streaming and prefix methods refuse (normalizing a text
    piecewise is not normalizing it); normalize the text first and use them on an Encoding
    without normalization.
    """

    def encode_ordinary(self, text: str) -> list[int]:
        return super().encode_ordinary(unicodedata.normalize("NFC", text))

    def encode(self, text: str, **kwargs: Any) -> list[int]:  # type: ignore[override]
        return super().encode(unicodedata.normalize("NFC", text), **kwargs)

    def count_tokens(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().count_tokens(unicodedata.normalize("NFC", text), **kwargs)

    def encode_to_numpy(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().encode_to_numpy(unicodedata.normalize("NFC", text), **kwargs)

    def encode_ordinary_batch(self, text: list[str], **kwargs: Any) -> list[list[int]]:  # type: ignore[override]
        return super().encode_ordinary_batch([unicodedata.normalize("NFC", t) for t in text], **kwargs)

    def encode_batch(self, text: list[str], **kwargs: Any) -> list[list[int]]:  # type: ignore[override]
        return super().encode_batch([unicodedata.normalize("NFC", t) for t in text], **kwargs)

    def encode_with_unstable(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().encode_with_unstable(unicodedata.normalize("NFC", text), **kwargs)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(
            f"encoding {self.name!r} normalizes text (NFC) before encoding, which streaming, "
            "truncation and prefix methods cannot do piece by piece: normalize the whole text "
            "with unicodedata.normalize('NFC', text) and use an Encoding without normalization"
        )

    stream_encoder = _refuse  # type: ignore[assignment]
    truncate = _refuse  # type: ignore[assignment]
    encode_ordinary_batch_to_numpy = _refuse  # type: ignore[assignment]
    encode_batch_to_numpy = _refuse  # type: ignore[assignment]
    prefix_index = _refuse  # type: ignore[assignment]
    prefix_last_tokens = _refuse  # type: ignore[assignment]
    encode_prefix = _refuse  # type: ignore[assignment]


def _normalization(normalizer: Any, where: str) -> bool:
    """True for NFC, False for none; ValueError for anything else."""
    if normalizer is None:
        return False
    kind = normalizer.get("type") if isinstance(normalizer, dict) else None
    if kind == "NFC":
        return True
    if kind == "Sequence":  # each step none or NFC (NFC twice is NFC)
        return any([_normalization(step, where) for step in normalizer.get("normalizers") or []])
    raise ValueError(f"{where}: the normalizer {normalizer!r} is not supported (only none or NFC can be "
                     "applied exactly)")


def _pattern(pre_tokenizer: Any, where: str) -> str:
    """The pat_str of a ByteLevel pre-tokenizer, alone or after one regex Split."""
    def byte_level(step: Any, use_regex: bool) -> bool:
        return (isinstance(step, dict) and step.get("type") == "ByteLevel" and not step.get("add_prefix_space", False)
                and bool(step.get("use_regex", True)) == use_regex)

    if byte_level(pre_tokenizer, True):
        return BYTE_LEVEL_PAT_STR
    steps = pre_tokenizer.get("pretokenizers") if isinstance(pre_tokenizer, dict) and pre_tokenizer.get(
        "type") == "Sequence" else None
    if steps is not None and len(steps) == 1 and byte_level(steps[0], True):
        return BYTE_LEVEL_PAT_STR
    if steps is not None and len(steps) == 2 and byte_level(steps[1], False):
        split = steps[0]
        if (isinstance(split, dict) and split.get("type") == "Split" and split.get("behavior") == "Isolated"
                and not split.get("invert", False) and isinstance(split.get("pattern"), dict)
                and isinstance(split["pattern"].get("Regex"), str)):
            return split["pattern"]["Regex"]
    raise ValueError(
        f"{where}: the pre-tokenizer is not ByteLevel alone or one regex Split (Isolated) then "
        f"ByteLevel without its regex, so no single tiktoken pattern splits text as it does: "
        f"{str(pre_tokenizer)[:300]}"
    )


def hf_tokenizer_encoding(data: dict, name: str, path: Path) -> Encoding:
    """The Encoding for a parsed tokenizer.json (the module docstring says which are taken)."""
    where = str(path)
    model = data["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"{where}: the model is {model.get('type')!r}, not BPE")
    for key in ("byte_fallback", "dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"{where}: the BPE model sets {key}={model[key]!r}, which tiktoken's BPE does not have")
    normalize = _normalization(data.get("normalizer"), where)
    pat_str = _pattern(data.get("pre_tokenizer"), where)
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise ValueError(f"{where}: the BPE model has no vocab or merges")
    ranks = {_token_bytes(text, where): int(token_id) for text, token_id in vocab.items()}
    if len(ranks) != len(vocab):
        raise ValueError(f"{where}: two vocabulary entries have the same bytes")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(f"{where}: the vocabulary lacks the single bytes {missing[:8]}: not byte-level BPE")
    made = _check_merges(merges, ranks, where)
    taken = set(ranks.values())
    specials = {}
    for entry in data.get("added_tokens") or []:
        token_id = int(entry["id"])
        if token_id not in taken:
            specials[entry["content"]] = token_id
    encoding_class = NormalizedEncoding if normalize else Encoding
    encoding = encoding_class(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)
    if encoding.pretokenizer == "regex" and "every position" in (encoding.pretokenizer_reason or ""):
        raise ValueError(f"{where}: the pre-tokenizer's pattern does not match at every position; "
                         "tokenizers keeps the text between matches as pieces, tiktoken drops it")
    # Which longer tokens tiktoken's BPE makes from their own bytes (the others come out only
    # through the whole-piece shortcut).
    longer = [token for token in ranks if len(token) > 1]
    bpe = encoding._core_bpe._vocab
    canonical = {token for token in longer if bpe.encode_pieces([token], shortcut=False) == [ranks[token]]}
    unmade = sorted(canonical - made, key=ranks.__getitem__)
    if unmade:
        raise ValueError(f"{where}: {len(unmade)} tokens that tiktoken's BPE makes are made by no merge "
                         f"(first: {unmade[0]!r}, id {ranks[unmade[0]]}): ids are not merge priorities")
    overmade = sorted(made - canonical, key=ranks.__getitem__)
    if overmade:
        raise ValueError(f"{where}: {len(overmade)} merges make tokens tiktoken's BPE does not make from their "
                         f"bytes (first: {overmade[0]!r}): the merges are not in the order of the ids")
    if len(canonical) < len(longer) and not model.get("ignore_merges", False):
        raise ValueError(f"{where}: {len(longer) - len(canonical)} tokens are made by no merge, and the file does "
                         "not set ignore_merges, so `tokenizers` never gives them where tiktoken's whole-piece "
                         "shortcut would")
    return encoding


def _check_merges(merges: list, ranks: dict[bytes, int], where: str) -> set[bytes]:
    """The tokens the merges make; ValueError unless each makes a token, ids ascending."""
    made: set[bytes] = set()
    previous = -1
    for index, merge in enumerate(merges):
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, (list, tuple)):
            parts = list(merge)
        else:
            parts = []
        if len(parts) != 2:
            raise ValueError(f"{where}: merge {index} ({merge!r}) is not a pair")
        token = _token_bytes(parts[0], where) + _token_bytes(parts[1], where)
        token_id = ranks.get(token)
        if token_id is None:
            raise ValueError(f"{where}: merge {index} ({merge!r}) makes no token of the vocabulary")
        if token_id <= previous:
            raise ValueError(f"{where}: merge {index} ({merge!r}) makes id {token_id}, not above the id {previous} "
                             "of the merge before: ids are not merge priorities, which tiktoken's BPE needs")
        previous = token_id
        made.add(token)
    return made
