"""Values of column and partition stats: their types, their order, and the Avro wrappers.

Hudi keeps a min/max as a one-field wrapper record inside a union (`IntWrapper`,
`StringWrapper`...). Index version V2 (Hudi 1.1, `ValueType`) writes only the primitive
wrappers and names the logical type in `valueType` (`HoodieValueTypeInfo`: the type's ordinal
and, for decimals, "precision,scale"); dates go in `IntWrapper` as epoch days, timestamps in
`LongWrapper`, decimals in `BytesWrapper` as the unscaled value's minimal two's complement
(Java's `BigInteger.toByteArray`). V1 writes no `valueType` and picks the wrapper by the Java
type of the value: decimals in `DecimalWrapper` (`decimal(30, 15)`: on the wire the unscaled
value at scale 15, the same two's complement), dates in `DateWrapper`.

Ranges merge with Java's `compareTo` of those values: strings by UTF-16 code unit, byte
buffers by signed bytes, floats with -0.0 < 0.0 and NaN last, decimals by value.

A value is held as the Python form of Hudi's in-memory value: bool, int (also dates as epoch
days, times and timestamps in their unit), float, str (also UUIDs), bytes, Decimal.
"""

from __future__ import annotations

import enum
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

from tms.hudi.errors import UnsupportedTableError

__all__ = [
    "NAMESPACE",
    "Value",
    "ValueType",
    "decimal_to_unscaled_bytes",
    "java_order_key",
    "unwrap",
    "wrap",
]

NAMESPACE = "org.apache.hudi.avro.model"
Value = bool | int | float | str | bytes | Decimal


class ValueType(enum.IntEnum):
    """Hudi's `org.apache.hudi.stats.ValueType`, by ordinal (what `typeOrdinal` stores)."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


_PRIMITIVE_WRAPPER = {
    ValueType.BOOLEAN: "BooleanWrapper",
    ValueType.INT: "IntWrapper",
    ValueType.LONG: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper",
    ValueType.DOUBLE: "DoubleWrapper",
    ValueType.STRING: "StringWrapper",
    ValueType.BYTES: "BytesWrapper",
    ValueType.FIXED: "BytesWrapper",
    ValueType.DECIMAL: "BytesWrapper",
    ValueType.UUID: "StringWrapper",
    ValueType.DATE: "IntWrapper",
    ValueType.TIME_MILLIS: "IntWrapper",
    ValueType.TIME_MICROS: "LongWrapper",
    ValueType.TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.TIMESTAMP_MICROS: "LongWrapper",
    ValueType.TIMESTAMP_NANOS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MICROS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_NANOS: "LongWrapper",
}
V1_DECIMAL_SCALE = 15
"""`DecimalWrapper`'s value is `decimal(30, 15)`."""


def decimal_to_unscaled_bytes(value: Decimal, scale: int) -> bytes:
    """Java's `BigDecimal.unscaledValue().toByteArray()` for `value` at `scale`."""
    unscaled = int(value.scaleb(scale).to_integral_exact())
    bits = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def unscaled_bytes_to_decimal(raw: bytes, scale: int) -> Decimal:
    return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


def _full(name: str) -> str:
    return f"{NAMESPACE}.{name}"


def wrap(
    value: Value | None, value_type: ValueType, scale: int = 0, v1_wrapper: str = ""
) -> tuple[str, dict[str, Any]] | None:
    """The union branch of a min/max: (full wrapper name, {"value": ...}), as fastavro writes
    a named union branch; None stays null. V1 takes its wrapper from `v1_wrapper`."""
    if value is None or value_type is ValueType.NULL:
        return None
    if value_type is ValueType.V1:
        if v1_wrapper == "DecimalWrapper":
            # the wire form: metadata records are encoded raw, without logical types
            assert isinstance(value, Decimal)
            return _full(v1_wrapper), {"value": decimal_to_unscaled_bytes(value, V1_DECIMAL_SCALE)}
        return _full(v1_wrapper), {"value": value}
    wrapper = _PRIMITIVE_WRAPPER[value_type]
    if value_type is ValueType.DECIMAL:
        assert isinstance(value, Decimal)
        return _full(wrapper), {"value": decimal_to_unscaled_bytes(value, scale)}
    return _full(wrapper), {"value": value}


def unwrap(
    branch: tuple[str, dict[str, Any]] | None, value_type: ValueType, scale: int = 0
) -> tuple[Value | None, str]:
    """The value of a decoded min/max and its wrapper's simple name (for V1)."""
    if branch is None:
        return None, ""
    name, record = branch
    simple = name.rsplit(".", 1)[-1]
    raw = record["value"]
    if value_type is ValueType.DECIMAL:
        return unscaled_bytes_to_decimal(bytes(raw), scale), simple
    if simple == "DecimalWrapper" and isinstance(raw, bytes | bytearray):
        return unscaled_bytes_to_decimal(bytes(raw), V1_DECIMAL_SCALE), simple
    return raw, simple


def _float_key(value: float, single: bool) -> tuple[int, float, int]:
    if math.isnan(value):
        return (2, 0.0, 0)
    if value == 0.0:
        negative = struct.pack(">f" if single else ">d", value)[0] & 0x80
        return (1, 0.0, 0 if negative else 1)
    return (1, value, 0)


def java_order_key(value: Value, value_type: ValueType, v1_wrapper: str = "") -> Any:
    """A sort key that orders values as Java's `compareTo` does for Hudi's in-memory type."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value_type is ValueType.UUID:
            parsed = uuid.UUID(value).int
            msb, lsb = parsed >> 64, parsed & ((1 << 64) - 1)
            return tuple(x - (1 << 64) if x >= 1 << 63 else x for x in (msb, lsb))
        return value.encode("utf-16-be", "surrogatepass")
    if isinstance(value, bytes):
        return tuple(b - 256 if b >= 128 else b for b in value)
    if isinstance(value, float):
        single = value_type is ValueType.FLOAT or v1_wrapper == "FloatWrapper"
        return _float_key(value, single)
    return value


def check_known(value_type: int) -> ValueType:
    try:
        return ValueType(value_type)
    except ValueError:
        raise UnsupportedTableError(f"column stats value type {value_type} is unknown") from None
