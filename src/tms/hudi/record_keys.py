"""Record keys and partition paths computed from data fields, as Hudi's key generators do.

A table without meta fields (`hoodie.populate.meta.fields=false`, virtual keys) stores no
`_hoodie_record_key` or `_hoodie_partition_path`: whoever merges its records computes them with
the table's key generator. Hudi's rules (`KeyGenUtils`, `SimpleAvroKeyGenerator`,
`ComplexAvroKeyGenerator`, `NonpartitionedAvroKeyGenerator`, `PartitionPathEncodeUtils`):

- one record key field (simple, or non-partitioned with one field): the value as a string; a
  null or empty value is an error;
- several record key fields: `f1:v1,f2:v2`, a null value written `__null__` and an empty one
  `__empty__`; an error only when every value is null or empty;
- partition path: the partition fields' values joined by `/`, a null or empty value written
  `__HIVE_DEFAULT_PARTITION__`, each value `%XX`-escaped when URL encoding is on and prefixed
  by `field=` with hive-style partitioning; no partition fields: `''`.

The complex key generator with a single record key field is refused: Hudi releases disagree on
whether that key carries the `field:` prefix (HUDI-7001), so the key cannot be known for sure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY
from tms.hudi.properties import (
    KEY_GENERATOR_CLASS,
    KEY_GENERATOR_TYPE,
    TableConfig,
)

__all__ = [
    "DEFAULT_PARTITION_PATH",
    "EMPTY_PLACEHOLDER",
    "NULL_PLACEHOLDER",
    "URL_ENCODE_PARTITIONING",
    "KeyGeneration",
    "KeyGeneratorKind",
    "escape_path_name",
    "key_generation",
    "key_generation_refusals",
    "virtual_key_generation",
    "without_meta_values",
]

NULL_PLACEHOLDER = "__null__"
EMPTY_PLACEHOLDER = "__empty__"
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"

_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset("\"#%'*/:=?\\\x7f{[]^")
"""The characters `PartitionPathEncodeUtils.escapePathName` writes as `%XX`."""


class KeyGeneratorKind(StrEnum):
    """The key generators whose keys we compute (Hudi's `KeyGeneratorType` names)."""

    SIMPLE = "SIMPLE"
    COMPLEX = "COMPLEX"
    NON_PARTITION = "NON_PARTITION"


_KEYGEN = "org.apache.hudi.keygen."
_CLASS_KINDS = {
    _KEYGEN + "SimpleKeyGenerator": KeyGeneratorKind.SIMPLE,
    _KEYGEN + "SimpleAvroKeyGenerator": KeyGeneratorKind.SIMPLE,
    _KEYGEN + "ComplexKeyGenerator": KeyGeneratorKind.COMPLEX,
    _KEYGEN + "ComplexAvroKeyGenerator": KeyGeneratorKind.COMPLEX,
    _KEYGEN + "NonpartitionedKeyGenerator": KeyGeneratorKind.NON_PARTITION,
    _KEYGEN + "NonpartitionedAvroKeyGenerator": KeyGeneratorKind.NON_PARTITION,
}


@dataclass(frozen=True)
class KeyGeneration:
    """How a table's key generator derives record keys and partition paths from data."""

    kind: KeyGeneratorKind
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool = False
    url_encode: bool = False

    def record_keys(self, table: pa.Table) -> pa.ChunkedArray:
        """The record key of every row; `ValueError` for a key Hudi would refuse to make."""
        _require(table, self.record_key_fields, "record key")
        columns = [_strings(table, field) for field in self.record_key_fields]
        if len(columns) == 1:
            keys = columns[0]
            if pc.any(pc.or_kleene(pc.is_null(keys), pc.equal(keys, ""))).as_py():
                field = self.record_key_fields[0]
                raise ValueError(f"record key field {field!r} holds null or empty values")
            return keys
        blank = [pc.or_kleene(pc.is_null(c), pc.equal(c, "")) for c in columns]
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
        return _chunked(pc.binary_join_element_wise(*parts, ","))

    def check_field_types(self, schema: pa.Schema) -> None:
        """Refuse, before anything is written, key fields the table schema lacks or whose
        values we cannot turn into strings as Java does."""
        for field in (*self.record_key_fields, *self.partition_fields):
            index = schema.get_field_index(field)
            if index < 0:
                raise UnsupportedTableError(f"key field {field!r} is not in the table schema")
            _check_type(field, schema.field(index).type)

    def with_record_keys(self, table: pa.Table) -> pa.Table:
        """The rows with `_hoodie_record_key` computed from their data fields, so that they
        merge by key like rows whose key is stored."""
        keys = self.record_keys(table)
        index = table.schema.get_field_index(RECORD_KEY)
        if index < 0:
            return table.add_column(0, pa.field(RECORD_KEY, pa.string()), keys)
        return table.set_column(index, pa.field(RECORD_KEY, pa.string()), keys)

    def partition_paths(self, table: pa.Table) -> pa.ChunkedArray:
        """The partition path of every row."""
        if not self.partition_fields:
            return pa.chunked_array([pa.array([""] * table.num_rows, pa.string())])
        _require(table, self.partition_fields, "partition")
        parts = []
        for field in self.partition_fields:
            values = _strings(table, field)
            if self.url_encode:
                values = pa.chunked_array(
                    [pa.array([_escape_or_none(v) for v in values.to_pylist()], pa.string())]
                )
            blank = pc.or_kleene(pc.is_null(values), pc.equal(values, ""))
            values = pc.if_else(blank, DEFAULT_PARTITION_PATH, values)
            if self.hive_style:
                values = pc.binary_join_element_wise(f"{field}=", values, "")
            parts.append(values)
        paths = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
        return _chunked(paths)


def key_generation(config: TableConfig) -> KeyGeneration:
    """The table's key generation; `UnsupportedTableError` says why we cannot reproduce it."""
    reasons = key_generation_refusals(config)
    if reasons:
        raise UnsupportedTableError("; ".join(reasons))
    kind = _kind(config)
    assert kind is not None  # no refusal means a known kind
    return KeyGeneration(
        kind,
        tuple(config.record_key_fields),
        tuple(config.partition_fields) if kind is not KeyGeneratorKind.NON_PARTITION else (),
        config.hive_style_partitioning,
        config.get(URL_ENCODE_PARTITIONING, "false").strip().lower() == "true",
    )


def virtual_key_generation(config: TableConfig) -> KeyGeneration | None:
    """The key generation to merge a virtual-key table's records by; None when the table stores
    its keys in the meta fields."""
    return None if config.populate_meta_fields else key_generation(config)


def without_meta_values(table: pa.Table) -> pa.Table:
    """The rows with every meta column null, as Hudi writes a table without meta fields: the
    columns stay in the schema, their values are not populated."""
    for index, field in enumerate(table.schema):
        if field.name in META_FIELDS:
            table = table.set_column(index, field, pa.nulls(table.num_rows, field.type))
    return table


def key_generation_refusals(config: TableConfig) -> list[str]:
    """Why keys cannot be computed as the table's key generator does; empty if they can."""
    named = _named_generator(config)
    kind = _kind(config)
    record_key_fields = config.record_key_fields
    if kind is None:
        return [f"key generator {named} is not handled; only SIMPLE, COMPLEX and NON_PARTITION are"]
    if not record_key_fields:
        return ["no record key fields (hoodie.table.recordkey.fields): keys were generated"]
    if kind is KeyGeneratorKind.SIMPLE and len(record_key_fields) != 1:
        return [
            f"SIMPLE key generator with record key fields {record_key_fields}: needs exactly one"
        ]
    if kind is KeyGeneratorKind.SIMPLE and len(config.partition_fields) > 1:
        return [
            f"SIMPLE key generator with partition fields {config.partition_fields}:"
            " needs one at most"
        ]
    if kind is KeyGeneratorKind.COMPLEX and len(record_key_fields) == 1:
        return [
            "COMPLEX key generator with a single record key field: Hudi releases differ on whether"
            " the key carries the field name (HUDI-7001), so the key cannot be computed for sure"
        ]
    return []


def escape_path_name(value: str) -> str:
    """`PartitionPathEncodeUtils.escapePathName`: unsafe characters as `%XX`, upper-case hex."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _named_generator(config: TableConfig) -> str:
    return config.get(KEY_GENERATOR_CLASS).strip() or config.get(KEY_GENERATOR_TYPE).strip() or "-"


def _kind(config: TableConfig) -> KeyGeneratorKind | None:
    """The stated class, else the stated type, else what Hudi infers from the fields
    (`KeyGenUtils.inferKeyGeneratorType`)."""
    class_name = config.get(KEY_GENERATOR_CLASS).strip()
    if class_name:
        return _CLASS_KINDS.get(class_name)
    type_name = config.get(KEY_GENERATOR_TYPE).strip().upper()
    if type_name:
        try:
            return KeyGeneratorKind(type_name)
        except ValueError:
            return None
    partition_fields = config.partition_fields
    if not partition_fields:
        return KeyGeneratorKind.NON_PARTITION
    if len(partition_fields) == 1 and len(config.record_key_fields) == 1:
        return KeyGeneratorKind.SIMPLE
    return KeyGeneratorKind.COMPLEX


def _strings(table: pa.Table, field: str) -> pa.ChunkedArray:
    """The field's values as Java's `String.valueOf` writes them, for the types where ours agree."""
    column = table.column(field)
    _check_type(field, column.type)
    return column.cast(pa.string())


def _check_type(field: str, kind: pa.DataType) -> None:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return
    raise UnsupportedTableError(
        f"key field {field!r} has type {kind}: only string, integer and boolean key fields are"
        " handled"
    )


def _placeheld(column: pa.ChunkedArray) -> pa.ChunkedArray:
    empty = pc.if_else(pc.equal(column, ""), EMPTY_PLACEHOLDER, column)
    return pc.fill_null(empty, NULL_PLACEHOLDER)


def _escape_or_none(value: str | None) -> str | None:
    return None if value is None else escape_path_name(value)


def _chunked(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


def _require(table: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in table.column_names]
    if missing:
        raise ValueError(f"{what} fields missing from the records: {', '.join(missing)}")
