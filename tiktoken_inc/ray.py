"""Ray Data: tokenizing a dataset on a cluster, one flat batch per block of rows.

`Tokenize` is a callable class for `Dataset.map_batches(..., batch_format="pyarrow")`: Ray
makes one per worker, which loads the encoding once (mapping its tables from the on-disk
cache), and calls it on each batch of rows.  It appends a column of uint32 lists built
straight from `encode_batch_to_numpy`'s flat result -- the ids become the list column's
values and the offsets its offsets, without a copy and without a Python int per id.

```
import ray
from tiktoken_inc.ray import Tokenize

ds = ray.data.read_text("corpus/")                  # one row per line, in column "text"
ds = ds.map_batches(Tokenize, fn_constructor_kwargs={"encoding": "o200k_base"},
                    batch_format="pyarrow", concurrency=4)
ds.write_parquet("tokens/")                         # columns "text" and "tokens" (list<uint32>)
```
Needs `pip install 'tiktoken_inc[ray]'` (Ray Data, pyarrow and numpy).  This module is
`tiktoken_inc.ray`; code inside the package imports Ray itself by its absolute name, `ray`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Collection, Literal

from tiktoken_inc.core import Encoding
from tiktoken_inc.registry import get_encoding

if TYPE_CHECKING:
    import pyarrow



def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ImportError(
            "tiktoken_inc.ray.Tokenize builds Arrow columns, and pyarrow is not installed: "
            "pip install 'tiktoken_inc[ray]'"
        ) from None
    return pyarrow


class Tokenize:
    """Appends the token ids of a text column to a pyarrow batch: a callable class for
    `Dataset.map_batches(Tokenize, fn_constructor_kwargs={...}, batch_format="pyarrow")`.

    Args:
        encoding: an encoding name (loaded once per worker) or an `Encoding`.
        text_column: the column of str to encode (null texts get null token lists).
        output_column: the column of `list<uint32>` appended (replaced if it exists).
        allowed_special, disallowed_special: as for `Encoding.encode`; a text holding a
            disallowed special token raises encode's ValueError (`disallowed_special=()`
            encodes special-token text as ordinary text, as `encode_ordinary` does).
        num_threads: encoding threads per call (default 1: Ray runs a worker per CPU).

    ```
    >>> import pyarrow as pa
    >>> Tokenize("gpt2")(pa.table({"text": ["hello world", None]})).column("tokens").to_pylist()
    [[31373, 995], None]
    ```
    """

    def __init__(
        self,
        encoding: str | Encoding = "o200k_base",
        text_column: str = "text",
        output_column: str = "tokens",
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        num_threads: int = 1,
    ):
        self.encoding = get_encoding(encoding) if isinstance(encoding, str) else encoding
        self.text_column = text_column
        self.output_column = output_column
        self.allowed_special = allowed_special
        self.disallowed_special = disallowed_special
        self.num_threads = num_threads

    def __call__(self, batch: "pyarrow.Table") -> "pyarrow.Table":
        """`batch` with the token ids of its text column appended."""
        pa = _pyarrow()
        if not isinstance(batch, pa.Table):
            raise TypeError(
                f"Tokenize takes pyarrow tables, got {type(batch).__name__}: "
                "call map_batches(..., batch_format='pyarrow')"
            )
        column = batch.column(self.text_column)
        texts = column.to_pylist()
        nulls = column.null_count
        if nulls:
            texts = ["" if text is None else text for text in texts]
        ids, offsets = self.encoding.encode_batch_to_numpy(
            texts, num_threads=self.num_threads, allowed_special=self.allowed_special,
            disallowed_special=self.disallowed_special,
        )
        if len(ids) >= 2**31:
            raise ValueError(
                f"{len(ids)} ids in one batch of {len(texts)} rows: more than a list column's "
                "2**31 - 1; give map_batches a smaller batch_size"
            )
        mask = column.is_null().combine_chunks() if nulls else None
        tokens = pa.ListArray.from_arrays(
            pa.array(offsets.astype("int32")), pa.array(ids), type=pa.list_(pa.uint32()), mask=mask
        )
        if self.output_column in batch.column_names:
            return batch.set_column(batch.column_names.index(self.output_column), self.output_column, tokens)
        return batch.append_column(self.output_column, tokens)
