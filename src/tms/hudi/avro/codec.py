"""Avro codec for the plans and metadata on Hudi's timeline.

Hudi writes every plan (compaction, clustering, clean, rollback), the clean/rollback/savepoint
metadata and, from table version 8 (timeline layout 2), the commit metadata as an Avro object
container file holding exactly one record. ``TimelineMetadataUtils.serializeAvroMetadata`` and
``CommitMetadataSerDe.getInstantWriter`` use a plain ``DataFileWriter`` without ``setCodec``, so
the block codec is Avro's ``null`` codec; we write the same so our files are byte-compatible in
kind. Readers (Java Avro, hudi-rs) resolve our writer schema against theirs by field name, so the
schemas in ``avsc/`` carry Hudi's record names, namespace, field names, types and defaults.

Each ``avsc/<Name>.avsc`` defines one named record; references to other records are by name and
are inlined here (first use defines, later uses refer by full name) so the schema embedded in a
container file is self-contained.
"""

from __future__ import annotations

import copy
import functools
import io
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import fastavro

__all__ = [
    "AVRO_MAGIC",
    "NAMESPACE",
    "decode",
    "encode",
    "is_avro",
    "load_schema",
    "schema_names",
]

NAMESPACE = "org.apache.hudi.avro.model"
AVRO_MAGIC = b"Obj\x01"
"""First four bytes of every Avro object container file."""

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_CODECS = frozenset({"null", "deflate"})


def _simple_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _full_name(name: str, namespace: str = NAMESPACE) -> str:
    return name if "." in name else f"{namespace}.{name}"


@functools.cache
def _definitions() -> dict[str, dict[str, Any]]:
    """All shipped record definitions, keyed by simple record name (= file stem)."""
    found: dict[str, dict[str, Any]] = {}
    folder = resources.files("tms.hudi.avro").joinpath("avsc")
    for entry in folder.iterdir():
        if not entry.name.endswith(".avsc"):
            continue
        schema = json.loads(entry.read_text(encoding="utf-8"))
        stem = entry.name.removesuffix(".avsc")
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise RuntimeError(f"{entry.name}: expected one Avro record definition")
        if schema.get("name") != stem or schema.get("namespace") != NAMESPACE:
            raise RuntimeError(f"{entry.name}: record must be {NAMESPACE}.{stem}")
        found[stem] = schema
    return found


def _definition(name: str) -> dict[str, Any]:
    if "." in name and not name.startswith(NAMESPACE + "."):
        raise KeyError(f"unknown Hudi Avro schema {name!r}: not in namespace {NAMESPACE}")
    try:
        return _definitions()[_simple_name(name)]
    except KeyError:
        raise KeyError(
            f"unknown Hudi Avro schema {name!r}; known: {', '.join(schema_names())}"
        ) from None


def schema_names() -> list[str]:
    """Simple names of every record schema we ship."""
    return sorted(_definitions())


def _expand(node: Any, defined: set[str]) -> Any:
    """Inline named references so the result needs no external names."""
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        full = _full_name(node)
        if full in defined:
            return full
        return _expand(_definition(node), defined)
    if isinstance(node, list):
        return [_expand(branch, defined) for branch in node]
    if not isinstance(node, dict):
        raise TypeError(f"malformed Avro schema node: {node!r}")
    kind = node.get("type")
    if kind == "record":
        full = _full_name(node["name"], node.get("namespace", NAMESPACE))
        if full in defined:
            raise ValueError(f"Avro record {full} is defined twice")
        defined.add(full)
        out = {key: value for key, value in node.items() if key != "fields"}
        out["fields"] = [{**fld, "type": _expand(fld["type"], defined)} for fld in node["fields"]]
        return out
    if kind == "array":
        return {**node, "items": _expand(node["items"], defined)}
    if kind == "map":
        return {**node, "values": _expand(node["values"], defined)}
    if kind in ("enum", "fixed"):
        defined.add(_full_name(node["name"], node.get("namespace", NAMESPACE)))
        return node
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return node
    # {"type": "SomeRecord"} or {"type": [...]} wrappers.
    return _expand(kind, defined)


@functools.cache
def _expanded(simple_name: str) -> dict[str, Any]:
    result = _expand(_definition(simple_name), set())
    assert isinstance(result, dict)
    return result


@functools.cache
def _parsed(simple_name: str) -> Any:
    return fastavro.parse_schema(copy.deepcopy(_expanded(simple_name)))


def load_schema(name: str) -> dict[str, Any]:
    """Self-contained Avro schema (JSON form) of a Hudi record, e.g. ``HoodieCompactionPlan``.

    Accepts the simple or the full name. The parse is cached; a fresh copy is returned so callers
    may mutate it freely.
    """
    return copy.deepcopy(_expanded(_simple_name(_definition(name)["name"])))


# ---------------------------------------------------------------------------------------------
# Default filling: callers pass only the fields they care about.


def _resolve(schema: Any) -> Any:
    """Follow a by-name reference (or a ``{"type": "Name"}`` wrapper) to its definition."""
    while True:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            schema = _definition(schema)
        elif (
            isinstance(schema, dict)
            and isinstance(schema.get("type"), str | list)
            and schema["type"] not in ("record", "array", "map", "enum", "fixed")
        ):
            schema = schema["type"]
        else:
            return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema["type"])


def _nullable(schema: Any) -> bool:
    resolved = _resolve(schema)
    return resolved == "null" or (
        isinstance(resolved, list) and any(_resolve(b) == "null" for b in resolved)
    )


def _fill(schema: Any, value: Any, where: str) -> Any:
    schema = _resolve(schema)
    kind = _kind(schema)
    if kind == "union":
        if value is None:
            return None
        for branch in schema:
            resolved = _resolve(branch)
            branch_kind = _kind(resolved)
            if (branch_kind in ("record", "map") and isinstance(value, Mapping)) or (
                branch_kind == "array" and isinstance(value, list | tuple)
            ):
                return _fill(resolved, value, where)
        return value
    if kind == "record":
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{where}: expected a mapping for record {schema['name']}, "
                f"got {type(value).__name__}"
            )
        names = [fld["name"] for fld in schema["fields"]]
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown} for record {schema['name']}")
        out: dict[str, Any] = {}
        for fld in schema["fields"]:
            fname = fld["name"]
            if fname in value:
                out[fname] = _fill(fld["type"], value[fname], f"{where}.{fname}")
            elif "default" in fld:
                out[fname] = copy.deepcopy(fld["default"])
            elif _nullable(fld["type"]):
                out[fname] = None
            else:
                raise ValueError(
                    f"{where}: missing required field {fname!r} of record {schema['name']}"
                )
        return out
    if kind == "array":
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
        return [_fill(schema["items"], item, f"{where}[{i}]") for i, item in enumerate(value)]
    if kind == "map":
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {
            key: _fill(schema["values"], item, f"{where}[{key!r}]") for key, item in value.items()
        }
    return value


# ---------------------------------------------------------------------------------------------
# Container files.


def encode(name: str, record: Mapping[str, Any], *, codec: str = "null") -> bytes:
    """One-record Avro container file of Hudi record ``name``, as Hudi writes timeline files.

    Missing fields take their schema default (nullable fields without one become null); unknown
    fields and missing required fields raise ``ValueError``, as do values of the wrong type.
    """
    if codec not in _CODECS:
        raise ValueError(f"unsupported Avro codec {codec!r}; use one of {sorted(_CODECS)}")
    definition = _definition(name)
    simple = definition["name"]
    filled = _fill(definition, record, simple)
    buffer = io.BytesIO()
    try:
        fastavro.writer(buffer, _parsed(simple), [filled], codec=codec, validator=True)
    except Exception as exc:  # fastavro's ValidationError is not a ValueError
        raise ValueError(f"record does not fit Avro schema {simple}: {exc}") from exc
    return buffer.getvalue()


def is_avro(data: bytes) -> bool:
    """True when ``data`` starts like an Avro container (layout 2 metadata, plans)."""
    return bytes(data[:4]) == AVRO_MAGIC


def decode(data: bytes, name: str | None = None) -> dict[str, Any]:
    """First record of an Avro container file, as a plain dict.

    With ``name`` the record is resolved against our schema of that name, so fields that an
    older Hudi did not write come back with their defaults. Raises ``ValueError`` on empty,
    truncated or garbled bytes and on a container with no record.
    """
    if not data:
        raise ValueError("empty bytes: not an Avro container file")
    if not is_avro(data):
        raise ValueError("not an Avro container file (missing 'Obj\\x01' magic)")
    reader_schema = _parsed(_definition(name)["name"]) if name is not None else None
    try:
        # Read to the end (plans are small) so a damaged trailing sync marker is caught too.
        records = list(fastavro.reader(io.BytesIO(bytes(data)), reader_schema=reader_schema))
    except Exception as exc:  # fastavro surfaces corruption as many exception types
        raise ValueError(f"garbled Avro container file: {exc}") from exc
    if not records:
        raise ValueError("Avro container file holds no record")
    record = records[0]
    if not isinstance(record, dict):
        raise ValueError(f"Avro container holds a {type(record).__name__}, not a record")
    return record
