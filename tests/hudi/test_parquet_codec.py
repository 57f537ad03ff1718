"""The codec of the base files a service writes: the writers' choice, as the files they wrote
show it, else the table's property, else Hudi's default (gzip)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tms.hudi.files.codec import CODEC_PROPERTY, codec_of_footer, parquet_codec
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage

ROWS = pa.table({"id": ["a", "b", "c"], "fare": [1.0, 2.0, 3.0]})


def config(**props: str) -> TableConfig:
    return TableConfig({"hoodie.table.name": "trips", **props})


@pytest.mark.parametrize("codec", ["snappy", "gzip", "zstd", "none"])
def test_a_base_files_codec_is_the_one_new_files_get(tmp_path: Path, codec: str) -> None:
    pq.write_table(ROWS, tmp_path / "f1.parquet", compression=codec)
    found = parquet_codec(Storage(str(tmp_path)), config(), ["f1.parquet"])
    assert found == codec
    assert codec_of_footer(pq.read_metadata(tmp_path / "f1.parquet")) == codec


def test_without_a_base_file_the_tables_property_then_hudis_default(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    assert parquet_codec(storage, config(**{CODEC_PROPERTY: "ZSTD"}), []) == "zstd"
    assert parquet_codec(storage, config(**{CODEC_PROPERTY: "lzo"}), []) == "gzip"
    assert parquet_codec(storage, config(), []) == "gzip"


def test_an_unreadable_base_file_falls_back_to_the_property(tmp_path: Path) -> None:
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    storage = Storage(str(tmp_path))
    assert parquet_codec(storage, config(**{CODEC_PROPERTY: "snappy"}), ["broken.parquet"]) == (
        "snappy"
    )
