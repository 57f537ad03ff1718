"""The Avro form of a delete block's records: Hudi's `HoodieDeleteRecordList`, whose ordering
values are wrapped in one wrapper record per type (HUDI-5760), and the wrapping itself."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import fastavro

from tms.hudi.errors import LogFormatError

_MODEL_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value_type: Any) -> dict[str, Any]:
    return {
        "namespace": _MODEL_NS,
        "type": "record",
        "name": name,
        "fields": [{"name": "value", "type": value_type}],
    }


_DECIMAL_WRAPPER_SCALE = 15
_DECIMAL_WRAPPER_PRECISION = 30

#: Union branches of ``orderingVal`` in Hudi's order; the position is the on-disk union index.
_ORDERING_WRAPPERS: tuple[dict[str, Any], ...] = (
    _wrapper("BooleanWrapper", "boolean"),
    _wrapper("IntWrapper", "int"),
    _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"),
    _wrapper("DoubleWrapper", "double"),
    _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", "string"),
    _wrapper("DateWrapper", "int"),
    _wrapper(
        "DecimalWrapper",
        {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": _DECIMAL_WRAPPER_PRECISION,
            "scale": _DECIMAL_WRAPPER_SCALE,
        },
    ),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", "long"),
)

DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "namespace": _MODEL_NS,
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "name": "HoodieDeleteRecord",
                    "type": "record",
                    "fields": [
                        {"name": "recordKey", "type": ["null", "string"], "default": None},
                        {"name": "partitionPath", "type": ["null", "string"], "default": None},
                        {
                            "name": "orderingVal",
                            "type": ["null", *_ORDERING_WRAPPERS],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}

PARSED_DELETE_SCHEMA = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)


def _wrapper_name(short: str) -> str:
    return f"{_MODEL_NS}.{short}"


def avro_kind(avro_type: Any) -> str | None:
    """The primitive or logical type name of a (possibly nullable) field type."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        return avro_kind(branches[0]) if len(branches) == 1 else None
    if isinstance(avro_type, dict):
        logical = avro_type.get("logicalType")
        if isinstance(logical, str):
            return logical
        return avro_kind(avro_type.get("type"))
    return avro_type if isinstance(avro_type, str) else None


def _micros_since_epoch(value: dt.datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def wrap_ordering_value(value: object, kind: str | None) -> tuple[str, dict[str, object]]:
    """Wrap ``value`` the way Java's ``HoodieAvroUtils.wrapValueIntoAvro`` does.

    Python has one int and one float type, so ``kind`` (the Avro type of the ordering field)
    picks Int vs Long and Float vs Double; Hudi compares ordering values of the same class.
    """
    if value is None:
        # Java's DeleteRecord default: Integer 0, which every Hudi reader (0.14 Java, hudi-rs)
        # treats as "no ordering value" -- a null here would NPE Java 0.14's merger.
        return _wrapper_name("IntWrapper"), {"value": 0}
    if isinstance(value, bool):
        return _wrapper_name("BooleanWrapper"), {"value": value}
    if isinstance(value, int):
        short = {"int": "IntWrapper", "date": "DateWrapper"}.get(kind or "", "LongWrapper")
        return _wrapper_name(short), {"value": value}
    if isinstance(value, float):
        short = "FloatWrapper" if kind == "float" else "DoubleWrapper"
        return _wrapper_name(short), {"value": value}
    if isinstance(value, str):
        return _wrapper_name("StringWrapper"), {"value": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return _wrapper_name("BytesWrapper"), {"value": bytes(value)}
    if isinstance(value, dt.datetime):
        return _wrapper_name("TimestampMicrosWrapper"), {"value": _micros_since_epoch(value)}
    if isinstance(value, dt.date):
        days = (value - _EPOCH_DATE).days
        return _wrapper_name("DateWrapper"), {"value": days}
    if isinstance(value, decimal.Decimal):
        scaled = value.quantize(decimal.Decimal(1).scaleb(-_DECIMAL_WRAPPER_SCALE))
        return _wrapper_name("DecimalWrapper"), {"value": scaled}
    raise LogFormatError(f"unsupported ordering value type {type(value).__name__}")


def unwrap_ordering_value(wrapped: object) -> object | None:
    """Inverse of ``_wrap_ordering_value`` (decoded with record names).

    Null and Int 0 both mean "no ordering value" to Hudi, so both come back as None.
    """
    if wrapped is None:
        return None
    if not (isinstance(wrapped, tuple) and len(wrapped) == 2):
        raise LogFormatError(f"unexpected ordering value encoding {wrapped!r}")
    name, record = wrapped
    value: object = record["value"]
    short = str(name).rsplit(".", 1)[-1]
    if short == "IntWrapper" and value == 0:
        return None  # Hudi's "no ordering value" sentinel
    if short == "DateWrapper" and isinstance(value, int):
        return _EPOCH_DATE + dt.timedelta(days=value)
    if short == "TimestampMicrosWrapper" and isinstance(value, int):
        return _EPOCH + dt.timedelta(microseconds=value)
    return value
