"""Record keys and partition paths of rows, computed from their data fields as the table's key
generator computes them (`KeyGenUtils`, `KeyGenerator.constructRecordKey`).

- One record key field (simple, timestamp-based, custom or non-partitioned with one field): the
  value as a string; a null or empty value is an error (`KeyGenUtils.getRecordKey`).
- Several record key fields, or the complex key generator: `f1:v1,f2:v2`, a null value written
  `__null__` and an empty one `__empty__`; an error only when every value is null or empty.
- Partition path: each partition field's part joined by `/`; no partition fields: `''`. A plain
  part is the value, `__HIVE_DEFAULT_PARTITION__` when null or empty, `%XX`-escaped when URL
  encoding is on (`KeyGenUtils.getPartitionPath`); a timestamp part is the value printed as a
  date (`timestamps`), escaped likewise. With hive-style partitioning each part is `field=part`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY
from tms.hudi.record_keys.timestamps import TimestampPartitioning
from tms.hudi.record_keys.values import (
    DEFAULT_PARTITION_PATH,
    EMPTY_PLACEHOLDER,
    NULL_PLACEHOLDER,
    check_key_type,
    chunked,
    escaped,
    key_strings,
)

__all__ = ["KeyGeneration", "KeyGeneratorKind", "without_meta_values"]


class KeyGeneratorKind(StrEnum):
    """The key generators whose keys we compute (Hudi's `KeyGeneratorType` names)."""

    SIMPLE = "SIMPLE"
    COMPLEX = "COMPLEX"
    NON_PARTITION = "NON_PARTITION"
    TIMESTAMP = "TIMESTAMP"
    CUSTOM = "CUSTOM"


@dataclass(frozen=True)
class KeyGeneration:
    """How a table's key generator derives record keys and partition paths from data.

    Merging needs only the record key (a file group's partition is known), so a key generation
    whose partition paths cannot be reproduced still computes record keys; `partition_paths`
    then raises `UnsupportedTableError` with `partition_refusal`.
    """

    kind: KeyGeneratorKind
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool = False
    url_encode: bool = False
    timestamp_fields: frozenset[str] = frozenset()
    """Partition fields printed as timestamps (the timestamp-based key generator's one, the
    custom key generator's `field:TIMESTAMP` ones)."""
    timestamps: TimestampPartitioning | None = None
    partition_refusal: str | None = None
    """Why partition paths cannot be computed as Hudi does; None when they can."""

    @property
    def composite_keys(self) -> bool:
        """Whether keys are `field:value` pairs: the complex key generator (any number of
        fields), or several record key fields."""
        return self.kind is KeyGeneratorKind.COMPLEX or len(self.record_key_fields) > 1

    def record_keys(self, table: pa.Table) -> pa.ChunkedArray:
        """The record key of every row; `ValueError` for a key Hudi would refuse to make."""
        _require(table, self.record_key_fields, "record key")
        columns = [key_strings(table.column(f), f) for f in self.record_key_fields]
        blank = [pc.or_kleene(pc.is_null(c), pc.equal(c, "")) for c in columns]
        if not self.composite_keys:
            if pc.any(blank[0]).as_py():
                field = self.record_key_fields[0]
                raise ValueError(f"record key field {field!r} holds null or empty values")
            return columns[0]
        all_blank = blank[0]
        for more in blank[1:]:
            all_blank = pc.and_kleene(all_blank, more)
        if pc.any(all_blank).as_py():
            raise ValueError(
                f"record key fields {list(self.record_key_fields)} are all null or empty in a row"
            )
        parts = [
            pc.binary_join_element_wise(f"{field}:", _placeheld(column), "")
            for field, column in zip(self.record_key_fields, columns, strict=True)
        ]
        return chunked(parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ","))

    def check_field_types(self, schema: pa.Schema) -> None:
        """Refuse, before anything is written, record key fields the table schema lacks or whose
        values we cannot turn into strings as Hudi does."""
        for field in self.record_key_fields:
            index = schema.get_field_index(field)
            if index < 0:
                raise UnsupportedTableError(f"key field {field!r} is not in the table schema")
            check_key_type(field, schema.field(index).type)

    def with_record_keys(self, table: pa.Table) -> pa.Table:
        """The rows with `_hoodie_record_key` computed from their data fields, so that they
        merge by key like rows whose key is stored."""
        keys = self.record_keys(table)
        index = table.schema.get_field_index(RECORD_KEY)
        if index < 0:
            return table.add_column(0, pa.field(RECORD_KEY, pa.string()), keys)
        return table.set_column(index, pa.field(RECORD_KEY, pa.string()), keys)

    def partition_paths(self, table: pa.Table) -> pa.ChunkedArray:
        """The partition path of every row; `UnsupportedTableError` when the table's settings
        do not determine it."""
        if self.partition_refusal is not None:
            raise UnsupportedTableError(self.partition_refusal)
        if not self.partition_fields:
            return pa.chunked_array([pa.array([""] * table.num_rows, pa.string())])
        _require(table, self.partition_fields, "partition")
        parts = [self._partition_part(table, field) for field in self.partition_fields]
        return chunked(parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/"))

    def _partition_part(self, table: pa.Table, field: str) -> pa.ChunkedArray:
        if field in self.timestamp_fields:
            assert self.timestamps is not None
            values = self.timestamps.paths(table.column(field), field)
            values = escaped(values) if self.url_encode else values
        else:
            values = key_strings(table.column(field), field)
            values = escaped(values) if self.url_encode else values
            blank = pc.or_kleene(pc.is_null(values), pc.equal(values, ""))
            values = chunked(pc.if_else(blank, DEFAULT_PARTITION_PATH, values))
        if self.hive_style:
            return chunked(pc.binary_join_element_wise(f"{field}=", values, ""))
        return values


def without_meta_values(table: pa.Table) -> pa.Table:
    """The rows with every meta column null, as Hudi writes a table without meta fields: the
    columns stay in the schema, their values are not populated."""
    for index, field in enumerate(table.schema):
        if field.name in META_FIELDS:
            table = table.set_column(index, field, pa.nulls(table.num_rows, field.type))
    return table


def _placeheld(column: pa.ChunkedArray) -> pa.ChunkedArray:
    empty = pc.if_else(pc.equal(column, ""), EMPTY_PLACEHOLDER, column)
    return pc.fill_null(empty, NULL_PLACEHOLDER)


def _require(table: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in table.column_names]
    if missing:
        raise ValueError(f"{what} fields missing from the records: {', '.join(missing)}")
