"""Shared fixtures: tiktoken itself as an offline reference, the encodings under test, corpora.

`tiktoken.get_encoding` normally downloads its rank files.  The session fixture
`tiktoken_offline` copies the rank files bundled in the package (`tiktoken_inc/ranks/`)
into a temporary cache dir under the names tiktoken looks for (`sha1(url)`), points
TIKTOKEN_CACHE_DIR at it for the whole session and restores the variable afterwards.
It is autouse, so no test can reach the network through tiktoken by accident.

The corpora (`../shared/corpora/` beside the repository) are optional: tests that read
them use the `corpora` fixture, which skips with a reason when the directory is absent.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from support import CORPORA_DIR, RANK_FILES, RANK_URL, rank_file, reference_name

settings.register_profile(
    "tiktoken_inc", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("tiktoken_inc")


@pytest.fixture(scope="session", autouse=True)
def tiktoken_offline(tmp_path_factory):
    """Makes tiktoken load its rank files from a temp cache holding the bundled copies."""
    cache = tmp_path_factory.mktemp("tiktoken_cache")
    for name in RANK_FILES:
        key = hashlib.sha1(RANK_URL.format(name).encode()).hexdigest()
        shutil.copyfile(rank_file(name), cache / key)
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        yield cache
    finally:
        if saved is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def reference(tiktoken_offline):
    """reference(name) -> tiktoken's own Encoding for `name` (gpt2 is served by r50k_base)."""
    import tiktoken

    def get(name: str):
        return tiktoken.get_encoding(reference_name(name))

    return get


@pytest.fixture(scope="session")
def encoding():
    """encoding(name) -> tiktoken_inc's Encoding for `name`."""
    import tiktoken_inc

    return tiktoken_inc.get_encoding


@pytest.fixture(scope="session")
def ranks_of():
    """ranks_of(rank_file_name) -> {token bytes: rank}, parsed from the bundled file (cached)."""
    from reference_bpe import load_tiktoken_ranks

    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = load_tiktoken_ranks(rank_file(name))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def native_vocab(ranks_of):
    """native_vocab(rank_file_name) -> a NativeVocab built from that rank file (cached, no specials)."""
    from tiktoken_inc._native import NativeVocab

    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = NativeVocab(ranks_of(name), {})
        return cache[name]

    return get


@pytest.fixture(scope="session")
def corpora() -> Path:
    """The directory ../shared/corpora relative to the repo root; skips when it is absent."""
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"corpora not available: {CORPORA_DIR} does not exist")
    return CORPORA_DIR
