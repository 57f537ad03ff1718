"""The file info block's payload: `PBUF` then a delimited `FileInfoProto`, a repeated
`BytesBytesPair` (first = key, second = value) in field 1."""

from __future__ import annotations

from tms.hudi.errors import HFileError
from tms.hudi.hfile import protobuf as pb
from tms.hudi.hfile.format import PBUF_MAGIC


def decode_file_info(payload: bytes) -> dict[bytes, bytes]:
    if not payload.startswith(PBUF_MAGIC):
        raise HFileError("file info block does not start with PBUF")
    message, _ = pb.read_delimited(payload, len(PBUF_MAGIC))
    info: dict[bytes, bytes] = {}
    for pair in pb.parse_message(message).get(1, []):
        if not isinstance(pair, bytes):
            raise HFileError("file info entry is not a key/value pair")
        fields = pb.parse_message(pair)
        info[pb.bytes_field(fields, 1)] = pb.bytes_field(fields, 2)
    return info


def encode_file_info(info: dict[bytes, bytes]) -> bytes:
    pairs = b"".join(
        pb.encode_bytes_field(1, pb.encode_bytes_field(1, k) + pb.encode_bytes_field(2, v))
        for k, v in info.items()
    )
    return PBUF_MAGIC + pb.write_delimited(pairs)
