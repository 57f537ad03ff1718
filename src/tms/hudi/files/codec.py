"""The Parquet compression codec of the base files a table service writes.

A table's writers choose it (`hoodie.parquet.compression.codec`, gzip by default) in their own
configs, which tms never sees: so a service writes with the codec of the base files it
rewrites, which says what the writers chose, else the table's property when it has one, else
Hudi's default. A compacted or clustered file is then as large as the writer's would be."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tms.hudi.files.data import read_footer
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage

__all__ = ["CODEC_PROPERTY", "HUDI_DEFAULT_CODEC", "codec_of_footer", "parquet_codec"]

CODEC_PROPERTY = "hoodie.parquet.compression.codec"
HUDI_DEFAULT_CODEC = "gzip"
"""Hudi's default of `hoodie.parquet.compression.codec`."""

_ARROW_CODECS = {
    "UNCOMPRESSED": "none",
    "NONE": "none",
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "ZSTD": "zstd",
    "LZ4": "lz4",
    "LZ4_RAW": "lz4",
    "BROTLI": "brotli",
}
"""Parquet's codec names (a footer's, or Hudi's config values upper-cased) → Arrow's."""


def codec_of_footer(footer: Any) -> str | None:
    """The codec of a base file's first column chunk (`pyarrow.parquet.FileMetaData`), as
    Arrow names it; None for a file with no row group or a codec Arrow cannot write."""
    if footer.num_row_groups == 0 or footer.num_columns == 0:
        return None
    return _ARROW_CODECS.get(str(footer.row_group(0).column(0).compression).upper())


def parquet_codec(storage: Storage, config: TableConfig, base_files: Iterable[str]) -> str:
    """The codec for new base files of a service rewriting `base_files` (paths relative to
    the table): the first one's codec, else the table's property, else Hudi's default. One
    footer read, on the driver."""
    for path in base_files:
        try:
            found = codec_of_footer(read_footer(storage, path))
        except (OSError, ValueError):
            found = None  # a file the tasks will fail on themselves, saying why
        if found is not None:
            return found
        break
    configured = _ARROW_CODECS.get(str(config.get(CODEC_PROPERTY) or "").strip().upper())
    return configured or HUDI_DEFAULT_CODEC
