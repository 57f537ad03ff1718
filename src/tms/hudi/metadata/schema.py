"""The Avro schema of the metadata table's records, and the binary codec of one record.

Every value in the metadata table is one `HoodieMetadataRecord` (hudi-common's
`HoodieMetadata.avsc`) in Avro binary encoding, under the writer schema the file carries: base
HFiles in their file info (`schema`), log blocks in their SCHEMA header. Hudi writes that schema
with its five meta fields prepended (`HoodieAvroUtils.addMetadataFields`, even though the
metadata table does not populate them) and with `avro.java.string` markers; `avsc/` holds it
exactly as Hudi 1.1 writes it for table versions 8 and 9 (Hudi 1.0's, for version 8, lacks the
`ArrayWrapper` branch and `valueType` of column stats).

What Hudi 0.14/0.15 (table version 6) write differs: no `SecondaryIndexMetadata`, no
`position` in the record index payload, no `isTightBound`/`valueType` in column stats and no
`LocalDateWrapper`/`ArrayWrapper` min/max branches. Readers need none of this: they decode with
the schema the file carries. A writer must write what the table's Hudi release reads, so it
takes the schema from the table's own metadata files, whatever the table version
(`writer_schema`); only a metadata table without files gets ours (`METADATA_RECORD_1X` on
version 8 and 9, `METADATA_RECORD_0X`, ours without what Hudi 1.x added, on version 6).

Values are decoded "raw": logical types are not applied (a decimal stays its bytes, a time its
long) and a union of records gives back `(record name, record)`, so decoding and encoding again
gives the same bytes.
"""

from __future__ import annotations

import functools
import io
import json
from importlib import resources
from typing import Any

import fastavro

__all__ = [
    "FIRST_1X_TABLE_VERSION",
    "METADATA_RECORD_0X",
    "METADATA_RECORD_1X",
    "decode_record",
    "encode_record",
    "layout_mismatch",
    "parsed_schema",
    "peek_type",
    "writer_schema",
]

FIRST_1X_TABLE_VERSION = 8
"""Table versions from here on are written by Hudi 1.x, whose schema we ship."""


def layout_mismatch(table_version: int, metadata_layout_version: int) -> str | None:
    """Why a metadata table's timeline layout does not fit the table version (version 6 keeps
    layout 1, versions 8 and 9 layout 2); None when it fits."""
    expected = 2 if table_version >= FIRST_1X_TABLE_VERSION else 1
    if metadata_layout_version == expected:
        return None
    return (
        f"the metadata table's timeline is layout {metadata_layout_version}, not layout "
        f"{expected} of table version {table_version}"
    )


@functools.cache
def _shipped() -> str:
    path = resources.files("tms.hudi.metadata").joinpath("avsc/HoodieMetadataRecord.avsc")
    return path.read_text(encoding="utf-8")


METADATA_RECORD_1X: str = _shipped()
"""`HoodieMetadataRecord` with meta fields, as Hudi 1.x writes it into files (JSON text)."""


_ADDED_IN_1X = {
    "HoodieMetadataRecord": {"SecondaryIndexMetadata"},
    "HoodieRecordIndexInfo": {"position"},
    "HoodieMetadataColumnStats": {"isTightBound", "valueType"},
}
"""Fields Hudi 1.x added to records Hudi 0.14/0.15 (table version 6) already had."""
_BRANCHES_ADDED_IN_1X = {"LocalDateWrapper", "ArrayWrapper"}
"""Column stats value wrappers Hudi 1.x added to the min/max unions."""


def _added_in_1x(branch: Any) -> bool:
    name = branch.get("name") if isinstance(branch, dict) else branch
    return isinstance(name, str) and name.rsplit(".", 1)[-1] in _BRANCHES_ADDED_IN_1X


def _without_1x_additions(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_1x_additions(b) for b in node if not _added_in_1x(b)]
    if not isinstance(node, dict):
        return node
    out = {key: _without_1x_additions(value) for key, value in node.items()}
    dropped = _ADDED_IN_1X.get(str(node.get("name")), set())
    if node.get("type") == "record" and dropped:
        out["fields"] = [f for f in out["fields"] if f["name"] not in dropped]
    return out


METADATA_RECORD_0X: str = json.dumps(
    _without_1x_additions(json.loads(METADATA_RECORD_1X)), separators=(",", ":")
)
"""`HoodieMetadataRecord` as table version 6 reads it: ours without the fields and union
branches Hudi 1.x added (for a metadata table created on version 6; an existing one's files
carry their own schema)."""


def _raw(node: Any) -> Any:
    """The schema without logical types, so values keep their wire form."""
    if isinstance(node, list):
        return [_raw(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    return {key: _raw(value) for key, value in node.items() if key != "logicalType"}


@functools.lru_cache(maxsize=16)
def parsed_schema(schema_text: str) -> Any:
    """fastavro's parse of a writer schema, logical types left out (cached per text)."""
    return fastavro.parse_schema(_raw(json.loads(schema_text)))


def decode_record(value: bytes, schema_text: str) -> dict[str, Any]:
    """One metadata record from Avro binary under `schema_text`, in raw form."""
    record = fastavro.schemaless_reader(
        io.BytesIO(value),
        parsed_schema(schema_text),
        None,
        return_record_name=True,
        return_record_name_override=True,
    )
    if not isinstance(record, dict):
        raise ValueError("a metadata table value is not an Avro record")
    return record


def encode_record(record: dict[str, Any], schema_text: str) -> bytes:
    """Avro binary of one metadata record (raw form) under `schema_text`."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed_schema(schema_text), record)
    return out.getvalue()


def writer_schema(table_version: int, found: str | None) -> str:
    """The schema to write new records with: the one the table's metadata files already carry
    (`found`), whatever the table version; for a metadata table without files, ours for 1.x
    tables and `METADATA_RECORD_0X` for older ones.

    The schema differs between releases writing the same table version (Hudi 1.0's version 8
    files have no `ArrayWrapper` and no `valueType`, Hudi 1.1's have both), and a reader that
    reconciles the schemas of one file group's files (hudi-rs) refuses a mix."""
    if found:
        return found
    return METADATA_RECORD_1X if table_version >= FIRST_1X_TABLE_VERSION else METADATA_RECORD_0X


_LEADING_UNIONS = 5
"""The meta fields Hudi prepends, each a union of null and string."""
_NULL_META_EMPTY_KEY = bytes(_LEADING_UNIONS + 1)
"""Five null meta fields and an empty key: how every stored record starts."""


@functools.lru_cache(maxsize=16)
def _peekable(schema_text: str) -> bool:
    """Whether records under this schema start with the five meta fields (null or string),
    `key` (a string) and `type` (an int), as every `HoodieMetadataRecord` schema Hudi writes."""
    fields = json.loads(schema_text).get("fields") or []
    if len(fields) < _LEADING_UNIONS + 2:
        return False

    def kind(field: dict[str, Any]) -> Any:
        value = field.get("type")
        return value.get("type") if isinstance(value, dict) else value

    unions = all(kind(f) == ["null", "string"] for f in fields[:_LEADING_UNIONS])
    key, type_ = fields[_LEADING_UNIONS], fields[_LEADING_UNIONS + 1]
    return (
        unions
        and (key.get("name"), kind(key)) == ("key", "string")
        and (type_.get("name"), kind(type_)) == ("type", "int")
    )


def _varint(value: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = value[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def peek_type(value: bytes, schema_text: str) -> tuple[int, bool] | None:
    """A record's `type` and whether its `key` field is empty, read from the first bytes of
    its Avro binary without decoding it; None when the schema is not of that shape or the
    bytes end early."""
    if not _peekable(schema_text):
        return None
    if value.startswith(_NULL_META_EMPTY_KEY) and len(value) > len(_NULL_META_EMPTY_KEY):
        first = value[len(_NULL_META_EMPTY_KEY)]
        if first < 0x80:  # as Hudi writes them: no meta field, no key, a small type
            return (first >> 1) ^ -(first & 1), True
    try:
        pos = 0
        for _ in range(_LEADING_UNIONS):
            branch, pos = _varint(value, pos)
            if branch == 1:
                length, pos = _varint(value, pos)
                pos += length
            elif branch != 0:
                return None
        key_length, pos = _varint(value, pos)
        record_type, _ = _varint(value, pos + key_length)
    except IndexError:
        return None
    return record_type, key_length == 0
