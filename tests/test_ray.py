"""`tiktoken_inc.ray.Tokenize` on its own and in Ray Data pipelines on a local Ray instance.

One Ray instance (`ray.init(num_cpus=2)`) serves the whole module: starting one takes
seconds.  Each pipeline reads text (read_text, one row per line; read_parquet), maps
`Tokenize` over it with `batch_format="pyarrow"`, writes Parquet and reads it back: every
row's tokens must equal `encode_ordinary` of its text (rows are checked against their own
text, so the order Ray writes them in does not matter).
"""
from __future__ import annotations

import os
import random

import pytest

import tiktoken_inc
from support import CORPUS_FILES, OUTSIDE_TREE, corpus_documents

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def check_rows(table, encoding, allowed="none") -> int:
    """Every row's tokens are its text's ids (null for a null text); returns the row count."""
    texts = table.column("text").to_pylist()
    tokens = table.column("tokens").to_pylist()
    assert table.schema.field("tokens").type == pa.list_(pa.uint32())
    for text, ids in zip(texts, tokens):
        if text is None:
            assert ids is None
        elif allowed == "all":
            assert ids == encoding.encode(text, allowed_special="all")
        else:
            assert ids == encoding.encode_ordinary(text), text[:60]
    return len(texts)


def test_tokenize_a_table():
    """Without Ray: nulls, chunked columns, special-token arguments, an output column that
    exists already, and tables that are not pyarrow."""
    from tiktoken_inc.ray import Tokenize

    enc = tiktoken_inc.get_encoding("cl100k_base")
    texts = ["hello world", None, "", "caf\u00e9 \U0001f600", "x <|endoftext|> y", "a\ud800b".encode(
        "utf-8", "surrogatepass").decode("utf-8", "replace")]
    table = pa.Table.from_batches([pa.record_batch({"text": texts[:3]}), pa.record_batch({"text": texts[3:]})])
    out = Tokenize("cl100k_base", disallowed_special=())(table)
    assert out.column_names == ["text", "tokens"] and check_rows(out, enc) == len(texts)
    out = Tokenize(enc, allowed_special="all")(out)  # replaces "tokens"
    assert out.column_names == ["text", "tokens"] and check_rows(out, enc, allowed="all") == len(texts)
    with pytest.raises(ValueError, match="disallowed special token"):
        Tokenize(enc)(table)
    renamed = Tokenize(enc, text_column="body", output_column="ids", disallowed_special=())(
        pa.table({"body": ["one", "two"]}))
    assert renamed.column("ids").to_pylist() == [enc.encode_ordinary("one"), enc.encode_ordinary("two")]
    with pytest.raises(TypeError, match="batch_format='pyarrow'"):
        Tokenize(enc)({"text": ["dict batches"]})


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module (2 CPUs), shut down at its end."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    # Ray puts the driver's working directory on its workers' sys.path: start it from outside the
    # source tree, or the workers of a clean clone import the unbuilt sources.
    here = os.getcwd()
    os.chdir(OUTSIDE_TREE)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    finally:
        os.chdir(here)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    try:
        yield ray
    finally:
        ray.shutdown()


def random_lines(count: int) -> list[str]:
    rng = random.Random(11)
    words = ["hello", "w\u00f6rld", "\u4e2d\u6587", "123456", "\U0001f600", "\u041f\u0440\u0438", "  x", "'s"]
    return [" ".join(rng.choice(words) for _ in range(rng.randrange(1, 40))) for _ in range(count)]


def test_read_text_pipeline(ray_instance, tmp_path):
    """read_text -> Tokenize -> write_parquet, generated text (no corpora needed)."""
    from tiktoken_inc.ray import Tokenize

    lines = random_lines(3000)
    source = tmp_path / "text"
    source.mkdir()
    for part in range(3):
        (source / f"part{part}.txt").write_text("\n".join(lines[part::3]) + "\n", encoding="utf-8")
    dataset = ray_instance.data.read_text(str(source))
    dataset = dataset.map_batches(Tokenize, fn_constructor_kwargs={"encoding": "o200k_base"},
                                  batch_format="pyarrow", concurrency=1)
    dataset.write_parquet(str(tmp_path / "tokens"))
    table = pq.read_table(str(tmp_path / "tokens"))
    assert check_rows(table, tiktoken_inc.get_encoding("o200k_base")) == len(lines)
    assert sorted(table.column("text").to_pylist()) == sorted(lines)


def test_corpora_pipelines(ray_instance, corpora, tmp_path):
    """The corpora: their lines through read_text, their documents through read_parquet;
    every row's tokens equal encode_ordinary of its text."""
    from tiktoken_inc.ray import Tokenize

    enc = tiktoken_inc.get_encoding("o200k_base")
    paths = [str(corpora / name) for name in CORPUS_FILES]
    lines = ray_instance.data.read_text(paths).map_batches(
        Tokenize, fn_constructor_kwargs={"encoding": "o200k_base"}, batch_format="pyarrow", concurrency=1,
    )
    lines.write_parquet(str(tmp_path / "lines"))
    expected_lines = sum(
        1 for name in CORPUS_FILES for line in (corpora / name).read_text(encoding="utf-8").split("\n") if line.strip()
    )
    assert check_rows(pq.read_table(str(tmp_path / "lines")), enc) >= expected_lines

    documents = [doc for name in CORPUS_FILES for doc in corpus_documents((corpora / name).read_text(encoding="utf-8"))]
    (tmp_path / "documents").mkdir()
    pq.write_table(pa.table({"text": documents}), str(tmp_path / "documents" / "part.parquet"), row_group_size=500)
    dataset = ray_instance.data.read_parquet(str(tmp_path / "documents")).map_batches(
        Tokenize, fn_constructor_kwargs={"encoding": "o200k_base", "disallowed_special": ()},
        batch_format="pyarrow", concurrency=1,
    )
    dataset.write_parquet(str(tmp_path / "tokens"))
    table = pq.read_table(str(tmp_path / "tokens"))
    assert check_rows(table, enc) == len(documents)
    assert sorted(table.column("text").to_pylist()) == sorted(documents)


def test_module_name_does_not_shadow_ray():
    """`tiktoken_inc.ray` is not `ray`: after importing it, `import ray` (absolute, as in
    every module of the package) is Ray itself, and the module imports no Ray at all."""
    import importlib
    import sys

    module = importlib.import_module("tiktoken_inc.ray")
    assert module.__name__ == "tiktoken_inc.ray" and sys.modules.get("ray") is not module
    ray = pytest.importorskip("ray")
    assert ray is not module and hasattr(ray, "init") and hasattr(ray, "data")
