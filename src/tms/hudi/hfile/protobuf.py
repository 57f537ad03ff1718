"""Just enough protobuf for the trailer (`FileTrailerProto`) and file info (`FileInfoProto`):
varints and length-delimited fields, nothing else."""

from __future__ import annotations

from tms.hudi.errors import HFileError

Fields = dict[int, list[int | bytes]]

_VARINT = 0
_LENGTH_DELIMITED = 2


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; returns (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise HFileError("truncated or oversized protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def write_varint(value: int) -> bytes:
    """Encode a non-negative int (a negative int64 as its two's complement, as protobuf does)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def parse_message(data: bytes) -> Fields:
    """Split a message into its fields by number; unknown wire types are refused."""
    fields: Fields = {}
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        value: int | bytes
        if wire_type == _VARINT:
            value, pos = read_varint(data, pos)
        elif wire_type == _LENGTH_DELIMITED:
            length, pos = read_varint(data, pos)
            if pos + length > len(data):
                raise HFileError("truncated protobuf field")
            value = data[pos : pos + length]
            pos += length
        else:
            raise HFileError(f"unsupported protobuf wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    return fields


def encode_varint_field(number: int, value: int) -> bytes:
    return write_varint(number << 3 | _VARINT) + write_varint(value)


def encode_bytes_field(number: int, value: bytes) -> bytes:
    return write_varint(number << 3 | _LENGTH_DELIMITED) + write_varint(len(value)) + value


def read_delimited(data: bytes, pos: int) -> tuple[bytes, int]:
    """A varint length then that many bytes (Java's `writeDelimitedTo`)."""
    length, pos = read_varint(data, pos)
    if pos + length > len(data):
        raise HFileError("truncated length-delimited protobuf message")
    return data[pos : pos + length], pos + length


def write_delimited(message: bytes) -> bytes:
    return write_varint(len(message)) + message


def int_field(fields: Fields, number: int, default: int = 0) -> int:
    """The last value of a varint field (protobuf's last-one-wins)."""
    values = fields.get(number)
    if not values:
        return default
    value = values[-1]
    if not isinstance(value, int):
        raise HFileError(f"protobuf field {number} is not a varint")
    return value


def bytes_field(fields: Fields, number: int, default: bytes = b"") -> bytes:
    values = fields.get(number)
    if not values:
        return default
    value = values[-1]
    if not isinstance(value, bytes):
        raise HFileError(f"protobuf field {number} is not length-delimited")
    return value
