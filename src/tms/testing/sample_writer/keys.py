"""Record keys and partition paths, computed as Hudi's key generators compute them.

Simple key generator: one record key field, its value as a string; one partition field, its
value (or `field=value` with hive-style partitioning). Complex key generator: several record
key fields as `f1:v1,f2:v2`, several partition fields joined with `/`. No partition fields:
every record in partition ''. Tables may also name the timestamp-based and custom key
generators (`create_table(..., key_generator=)`); their keys are computed by
`tms.hudi.record_keys` for tables without meta fields.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

SIMPLE_KEY_GENERATOR = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR = "org.apache.hudi.keygen.ComplexKeyGenerator"
NON_PARTITIONED_KEY_GENERATOR = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_KEY_GENERATOR = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM_KEY_GENERATOR = "org.apache.hudi.keygen.CustomKeyGenerator"
KEY_GENERATOR_TYPES = {
    SIMPLE_KEY_GENERATOR: "SIMPLE",
    COMPLEX_KEY_GENERATOR: "COMPLEX",
    NON_PARTITIONED_KEY_GENERATOR: "NON_PARTITION",
    TIMESTAMP_KEY_GENERATOR: "TIMESTAMP",
    CUSTOM_KEY_GENERATOR: "CUSTOM",
}
"""Table version 8+ records the key generator by type (`KeyGeneratorType`), not by class."""
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"


def key_generator_class(record_key_fields: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return NON_PARTITIONED_KEY_GENERATOR
    if len(record_key_fields) > 1 or len(partition_fields) > 1:
        return COMPLEX_KEY_GENERATOR
    return SIMPLE_KEY_GENERATOR


def _as_string(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    return pc.cast(column, pa.string())


def record_keys(batch: pa.Table, record_key_fields: Sequence[str]) -> pa.ChunkedArray:
    """`_hoodie_record_key` of every row; a null key is an error, as in Hudi."""
    _require(batch, record_key_fields, "record key")
    if len(record_key_fields) == 1:
        keys = _as_string(batch.column(record_key_fields[0]))
    else:
        parts = [
            pc.binary_join_element_wise(field + ":", _as_string(batch.column(field)), "")
            for field in record_key_fields
        ]
        keys = pc.binary_join_element_wise(*parts, ",")
    if keys.null_count:
        raise ValueError(f"record key fields {list(record_key_fields)} hold null values")
    return keys if isinstance(keys, pa.ChunkedArray) else pa.chunked_array([keys])


def partition_paths(
    batch: pa.Table, partition_fields: Sequence[str], hive_style: bool = False
) -> pa.ChunkedArray:
    """`_hoodie_partition_path` of every row."""
    if not partition_fields:
        return pa.chunked_array([pa.array([""] * batch.num_rows, pa.string())])
    _require(batch, partition_fields, "partition")
    parts = []
    for field in partition_fields:
        values = pc.fill_null(_as_string(batch.column(field)), DEFAULT_PARTITION_PATH)
        parts.append(pc.binary_join_element_wise(f"{field}=", values, "") if hive_style else values)
    paths = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
    return paths if isinstance(paths, pa.ChunkedArray) else pa.chunked_array([paths])


def _require(batch: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in batch.column_names]
    if missing:
        raise ValueError(f"{what} fields missing from the batch: {', '.join(missing)}")
