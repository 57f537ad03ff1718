"""A table's key generation, read from `hoodie.properties`.

The key generator is the stated class (`hoodie.table.keygenerator.class`), else the stated type
(`hoodie.table.keygenerator.type`, table version 8+), else what Hudi infers from the fields
(`KeyGenUtils.inferKeyGeneratorType`). Record keys are what merging needs, so only what keeps us
from computing them refuses a table here; what keeps us from computing partition paths is kept
in the key generation (`KeyGeneration.partition_refusal`) for whoever writes new records.

The complex key generator with a single record key field keys `field:value` in every release
but Hudi 0.14.1 to 1.0.2, which key the bare value (HUDI-7001); since 1.1 a writer at table
version 9 always keys `field:value`, at version 8 and below as `hoodie.write.complex.keygen.new.
encoding` says (`KeyGenUtils.encodeSingleKeyFieldNameForComplexKeyGen`). Neither the release nor
that setting is recorded, so such a table is computed only when it was created at version 9
(`hoodie.table.initial.version`), and refused otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import (
    INITIAL_VERSION,
    KEY_GENERATOR_CLASS,
    KEY_GENERATOR_TYPE,
    PARTITION_FIELDS,
    TableConfig,
)
from tms.hudi.record_keys.generation import KeyGeneration, KeyGeneratorKind
from tms.hudi.record_keys.timestamps import TimestampPartitioning, timestamp_partitioning

__all__ = [
    "URL_ENCODE_PARTITIONING",
    "ambiguous_complex_keys",
    "key_generation",
    "key_generation_refusals",
    "virtual_key_generation",
]

URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
SLASH_SEPARATED_DATES = "hoodie.datasource.write.slash.separated.date.partitioning"

_KEYGEN = "org.apache.hudi.keygen."
_CLASS_KINDS = {
    _KEYGEN + "SimpleKeyGenerator": KeyGeneratorKind.SIMPLE,
    _KEYGEN + "SimpleAvroKeyGenerator": KeyGeneratorKind.SIMPLE,
    _KEYGEN + "ComplexKeyGenerator": KeyGeneratorKind.COMPLEX,
    _KEYGEN + "ComplexAvroKeyGenerator": KeyGeneratorKind.COMPLEX,
    _KEYGEN + "NonpartitionedKeyGenerator": KeyGeneratorKind.NON_PARTITION,
    _KEYGEN + "NonpartitionedAvroKeyGenerator": KeyGeneratorKind.NON_PARTITION,
    _KEYGEN + "TimestampBasedKeyGenerator": KeyGeneratorKind.TIMESTAMP,
    _KEYGEN + "TimestampBasedAvroKeyGenerator": KeyGeneratorKind.TIMESTAMP,
    _KEYGEN + "CustomKeyGenerator": KeyGeneratorKind.CUSTOM,
    _KEYGEN + "CustomAvroKeyGenerator": KeyGeneratorKind.CUSTOM,
}
_TYPE_KINDS = {kind.value: kind for kind in KeyGeneratorKind} | {
    f"{kind.value}_AVRO": kind for kind in KeyGeneratorKind
}
"""`KeyGeneratorType` names: each kind and its `_AVRO` variant."""
_SINGLE_KEY_FIELD = (KeyGeneratorKind.SIMPLE, KeyGeneratorKind.TIMESTAMP)


def key_generation(config: TableConfig) -> KeyGeneration:
    """The table's key generation; `UnsupportedTableError` says why its record keys cannot be
    computed as Hudi does."""
    named = _named_generator(config)
    kind = _kind(config)
    if kind is None:
        raise UnsupportedTableError(
            f"key generator {named} is not handled; only SIMPLE, COMPLEX, NON_PARTITION,"
            " TIMESTAMP and CUSTOM are"
        )
    record_key_fields = tuple(config.record_key_fields)
    if not record_key_fields:
        raise UnsupportedTableError(
            "no record key fields (hoodie.table.recordkey.fields): keys were generated"
        )
    if kind in _SINGLE_KEY_FIELD and len(record_key_fields) != 1:
        raise UnsupportedTableError(
            f"{kind} key generator with record key fields {list(record_key_fields)}: needs"
            " exactly one"
        )
    if kind is KeyGeneratorKind.COMPLEX and len(record_key_fields) == 1:
        _check_single_complex_key(config)
    generation = KeyGeneration(
        kind,
        record_key_fields,
        (),
        config.hive_style_partitioning,
        config.get(URL_ENCODE_PARTITIONING, "false").strip().lower() == "true",
    )
    try:
        return _with_partitioning(generation, config, named)
    except UnsupportedTableError as refusal:
        return replace(generation, partition_refusal=str(refusal))


def key_generation_refusals(config: TableConfig) -> list[str]:
    """Why record keys cannot be computed as the table's key generator does; empty if they can."""
    try:
        key_generation(config)
    except UnsupportedTableError as refusal:
        return [str(refusal)]
    return []


def ambiguous_complex_keys(config: TableConfig) -> bool:
    """Whether the table's record keys are a single field's under the complex key generator
    on a table not created at version 9: keyed `field:value` or the bare value by release
    (HUDI-7001), which the table does not record."""
    if _kind(config) is not KeyGeneratorKind.COMPLEX or len(config.record_key_fields) != 1:
        return False
    try:
        _check_single_complex_key(config)
    except UnsupportedTableError:
        return True
    return False


def virtual_key_generation(config: TableConfig) -> KeyGeneration | None:
    """The key generation to merge a virtual-key table's records by; None when the table stores
    its keys in the meta fields."""
    return None if config.populate_meta_fields else key_generation(config)


def _with_partitioning(generation: KeyGeneration, config: TableConfig, named: str) -> KeyGeneration:
    """The key generation with its partition fields; `UnsupportedTableError` when the partition
    path is not determined by the table's settings."""
    if config.get(SLASH_SEPARATED_DATES).strip().lower() == "true":
        raise UnsupportedTableError(f"{SLASH_SEPARATED_DATES}=true is not handled")
    kind = generation.kind
    fields = tuple(config.partition_fields)
    if kind is KeyGeneratorKind.NON_PARTITION:
        return generation
    if kind is KeyGeneratorKind.SIMPLE and len(fields) > 1:
        raise UnsupportedTableError(f"SIMPLE key generator with partition fields {list(fields)}")
    if kind is KeyGeneratorKind.TIMESTAMP:
        if len(fields) != 1:
            raise UnsupportedTableError(
                f"TIMESTAMP key generator with partition fields {list(fields)}: needs exactly one"
            )
        return _timestamped(generation, fields, frozenset(fields), config, named)
    if kind is KeyGeneratorKind.CUSTOM:
        typed = _custom_partition_fields(config, named)
        stamped = frozenset(f for f, t in typed if t == "TIMESTAMP")
        return _timestamped(generation, tuple(f for f, _ in typed), stamped, config, named)
    return replace(generation, partition_fields=fields)


def _timestamped(
    generation: KeyGeneration,
    fields: tuple[str, ...],
    stamped: frozenset[str],
    config: TableConfig,
    named: str,
) -> KeyGeneration:
    timestamps: TimestampPartitioning | None = None
    if stamped:
        try:
            timestamps = timestamp_partitioning(config)
        except UnsupportedTableError as refusal:
            raise UnsupportedTableError(f"key generator {named}: {refusal}") from None
    return replace(
        generation, partition_fields=fields, timestamp_fields=stamped, timestamps=timestamps
    )


def _custom_partition_fields(config: TableConfig, named: str) -> list[tuple[str, str]]:
    """`field:TYPE` pairs of `hoodie.table.partition.fields` (`CustomAvroKeyGenerator.
    getPartitionFieldAndKeyType`); table version 8+ keeps the types there, 0.x writers and
    table version 6 keep only the names."""
    raw = config.get(PARTITION_FIELDS).strip()
    if not raw:
        return []
    typed: list[tuple[str, str]] = []
    for spec in (part.strip() for part in raw.split(",")):
        pieces = spec.split(":")
        if len(pieces) != 2:
            raise UnsupportedTableError(
                f"key generator {named}: partition field {spec!r} in {PARTITION_FIELDS} has no"
                " type (`field:SIMPLE` or `field:TIMESTAMP`)"
            )
        field, type_name = pieces
        if type_name.upper() not in ("SIMPLE", "TIMESTAMP"):
            raise UnsupportedTableError(
                f"key generator {named}: partition field {spec!r} has unknown type {type_name!r}"
            )
        typed.append((field, type_name.upper()))
    return typed


def _check_single_complex_key(config: TableConfig) -> None:
    initial = config.get(INITIAL_VERSION).strip()
    created_at_nine = config.table_version >= 9 and initial.isdigit() and int(initial) >= 9
    if not created_at_nine:
        raise UnsupportedTableError(
            "COMPLEX key generator with a single record key field on a table of version"
            f" {config.table_version} created at version {initial or 'unknown'}: Hudi 0.14.1 to"
            " 1.0.2 key it by the bare value,"
            " other releases by `field:value` as hoodie.write.complex.keygen.new.encoding says"
            " (HUDI-7001), and the table records neither, so the key cannot be computed for"
            " sure; tables created at version 9 are computed"
        )


def _named_generator(config: TableConfig) -> str:
    return config.get(KEY_GENERATOR_CLASS).strip() or config.get(KEY_GENERATOR_TYPE).strip() or "-"


def _kind(config: TableConfig) -> KeyGeneratorKind | None:
    class_name = config.get(KEY_GENERATOR_CLASS).strip()
    if class_name:
        return _CLASS_KINDS.get(class_name)
    type_name = config.get(KEY_GENERATOR_TYPE).strip().upper()
    if type_name:
        return _TYPE_KINDS.get(type_name)
    return _inferred_kind(config)


def _inferred_kind(config: TableConfig) -> KeyGeneratorKind:
    """`KeyGenUtils.inferKeyGeneratorType`: a typed first partition field means custom."""
    raw = [f.strip() for f in config.get(PARTITION_FIELDS).split(",") if f.strip()]
    if not raw:
        partition_kind = KeyGeneratorKind.NON_PARTITION
    elif ":" in raw[0]:
        partition_kind = KeyGeneratorKind.CUSTOM
    elif len(raw) == 1:
        partition_kind = KeyGeneratorKind.SIMPLE
    else:
        partition_kind = KeyGeneratorKind.COMPLEX
    if len(config.record_key_fields) > 1 and partition_kind is KeyGeneratorKind.SIMPLE:
        return KeyGeneratorKind.COMPLEX
    return partition_kind
