"""Data blocks of the log files the writer appends, in the format the writer is set to
(Hudi's `hoodie.logfile.data.block.format`): Avro records, or one whole Parquet file.

A Parquet data block (`HoodieParquetDataBlock`) holds the bytes of a Parquet file with the
meta columns, under the same INSTANT_TIME and SCHEMA header as an Avro block; Hudi and
hudi-rs read the content as a Parquet file.
"""

from __future__ import annotations

import enum
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tms.hudi.files.data import AVRO_SCHEMA_KEY, write_log_file
from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_writer import encode_log_block
from tms.hudi.storage import Storage

__all__ = ["LogBlockFormat", "encode_parquet_data_block", "write_data_log_file"]

PARQUET_BLOCK_COMPRESSION = "gzip"
"""Hudi's default `hoodie.parquet.compression.codec`."""


class LogBlockFormat(enum.StrEnum):
    AVRO = "avro"
    PARQUET = "parquet"


def encode_parquet_data_block(
    instant_time: str, avro_schema: dict[str, Any], rows: pa.Table
) -> bytes:
    """A PARQUET_DATA block of `rows` (meta columns included) written by `instant_time`."""
    schema_json = json.dumps(avro_schema, separators=(",", ":"))
    metadata = dict(rows.schema.metadata or {})
    metadata[AVRO_SCHEMA_KEY] = schema_json.encode()
    buffer = io.BytesIO()
    pq.write_table(
        rows.replace_schema_metadata(metadata), buffer, compression=PARQUET_BLOCK_COMPRESSION
    )
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json}
    return encode_log_block(BlockType.PARQUET_DATA, header, buffer.getvalue())


def write_data_log_file(
    storage: Storage,
    path: str,
    instant_time: str,
    avro_schema: dict[str, Any],
    rows: pa.Table,
    block_format: LogBlockFormat,
) -> int:
    """Write a new log file holding one data block of `rows`; returns its size."""
    if block_format is LogBlockFormat.AVRO:
        return write_log_file(storage, path, instant_time, avro_schema, records=rows)
    data = encode_parquet_data_block(instant_time, avro_schema, rows)
    storage.write_bytes(path, data, atomic=False)
    return len(data)
