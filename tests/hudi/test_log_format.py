"""Hudi log blocks: exact byte layout, round trips, and reads by the independent hudi-rs reader.

The hudi-rs tests build a small merge-on-read table (table version 6, timeline layout 1) by
hand in ``tmp_path`` -- base Parquet file with meta columns, completed deltacommits, log files
holding our blocks -- and assert what hudi-rs merges out of it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi
from tms.hudi.avro.schema import (
    META_FIELDS,
    arrow_schema_from_avro,
    avro_record_schema,
    avro_records_to_table,
    table_to_avro_records,
)
from tms.hudi.errors import LogFormatError
from tms.hudi.files.log_block import MAGIC, BlockType, DeleteRecord, HeaderKey, LogBlock
from tms.hudi.files.log_reader import read_log_blocks, read_log_file
from tms.hudi.files.log_writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_log_block,
    encode_rollback_block,
)
from tms.hudi.files.names import LogFileName
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY


def _schema(*fields: pa.Field[Any]) -> pa.Schema:
    return pa.schema(list(fields))


TABLE = "trips"
FILE_ID = "0a1b2c3d-0000-4000-8000-123456789abc-0"
TOKEN = "0-0-0"
PARTITION = "us"
C1, C2, C3, C4, C5 = (f"2024010100000{i}000" for i in range(5))

DATA_SCHEMA = _schema(
    pa.field("id", pa.string(), nullable=False),
    pa.field("ts", pa.int64(), nullable=False),
    pa.field("v", pa.string()),
    pa.field("region", pa.string()),
)
AVRO = avro_record_schema(TABLE, DATA_SCHEMA)
FULL_SCHEMA = arrow_schema_from_avro(AVRO)


def _row(key: str, ts: int, value: str | None, commit: str, seq: int = 0) -> dict[str, object]:
    return {
        COMMIT_TIME: commit,
        COMMIT_SEQNO: f"{commit}_0_{seq}",
        RECORD_KEY: key,
        PARTITION_PATH: PARTITION,
        FILE_NAME: f"{FILE_ID}_{TOKEN}_{C1}.parquet",
        "id": key,
        "ts": ts,
        "v": value,
        "region": PARTITION,
    }


# --------------------------------------------------------------------------------------------
# Byte layout
# --------------------------------------------------------------------------------------------


def test_rollback_block_bytes_match_hudi_layout() -> None:
    data = encode_rollback_block(C3, C2)
    header = b"".join(
        struct.pack(">ii", key, len(value)) + value
        for key, value in ((0, C3.encode()), (1, C2.encode()), (3, b"0"))
    )
    body = (
        struct.pack(">ii", 1, 0)  # log format version 1, COMMAND block
        + struct.pack(">i", 3)
        + header
        + struct.pack(">q", 0)  # no content
        + struct.pack(">i", 0)  # empty footer
    )
    block_length = len(body) + 8  # includes the trailing reverse pointer
    assert data == MAGIC + struct.pack(">q", block_length) + body + struct.pack(
        ">q", block_length + len(MAGIC)
    )


def test_avro_data_block_content_layout() -> None:
    data = encode_avro_data_block(C2, AVRO, [_row("a", 1, "x", C2), _row("b", 2, "y", C2)])
    (block_length,) = struct.unpack(">q", data[6:14])
    assert len(data) == 6 + 8 + block_length
    assert struct.unpack(">q", data[-8:])[0] == block_length + 6
    assert struct.unpack(">ii", data[14:22]) == (1, int(BlockType.AVRO_DATA))
    # header: INSTANT_TIME then SCHEMA, compact JSON
    pos = 22
    (count,) = struct.unpack(">i", data[pos : pos + 4])
    assert count == 2
    pos += 4
    values = {}
    for _ in range(count):
        key, length = struct.unpack(">ii", data[pos : pos + 8])
        values[key] = data[pos + 8 : pos + 8 + length].decode()
        pos += 8 + length
    assert values[0] == C2
    assert json.loads(values[2]) == AVRO
    (content_length,) = struct.unpack(">q", data[pos : pos + 8])
    content = data[pos + 8 : pos + 8 + content_length]
    assert struct.unpack(">ii", content[:8]) == (3, 2)  # block version 3, two records
    (first_len,) = struct.unpack(">i", content[8:12])
    (second_len,) = struct.unpack(">i", content[12 + first_len : 16 + first_len])
    assert 16 + first_len + second_len == len(content)


def test_delete_block_content_is_avro_delete_record_list() -> None:
    data = encode_delete_block(C2, AVRO, [DeleteRecord("k", "p", 7)], ordering_field="ts")
    block = read_log_blocks(data)[0]
    assert block.block_type is BlockType.DELETE
    assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    # content: version 3, int32 datum length, datum = 1 item, key, partition,
    # orderingVal branch 3 (LongWrapper) = 7, end of array
    datum = bytes([0x02, 0x02, 0x02]) + b"k" + bytes([0x02, 0x02]) + b"p"
    datum += bytes([0x06, 0x0E, 0x00])
    content = struct.pack(">ii", 3, len(datum)) + datum
    assert content in data


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


def test_round_trip_of_all_block_kinds(tmp_path: Path) -> None:
    records = [_row("a", 1, "x", C2, 0), _row("b", 2, None, C2, 1)]
    deletes = [
        DeleteRecord("a", PARTITION, 5),
        DeleteRecord("b", PARTITION, None),
        DeleteRecord("c", "", "text"),
        DeleteRecord("d", PARTITION, 2.5),
        DeleteRecord("e", PARTITION, dt.date(2024, 2, 29)),
        DeleteRecord("f", PARTITION, dt.datetime(2024, 1, 1, 12, 30, 1, 5, tzinfo=dt.UTC)),
        DeleteRecord("g", PARTITION, decimal.Decimal("12.5")),
        DeleteRecord("h", PARTITION, True),
        DeleteRecord("i", PARTITION, b"\x00\xff"),
    ]
    data = (
        encode_avro_data_block(C2, AVRO, records)
        + encode_delete_block(C3, AVRO, deletes, ordering_field="ts")
        + encode_rollback_block(C4, C3)
    )
    path = tmp_path / "log"
    path.write_bytes(data)
    with path.open("rb") as handle:
        blocks = read_log_file(handle)
    # one DELETE block per ordering-value wrapper type (all nine differ here)
    assert [b.block_type for b in blocks] == [
        BlockType.AVRO_DATA,
        *[BlockType.DELETE] * len(deletes),
        BlockType.COMMAND,
    ]
    data_block, *delete_blocks, rollback = blocks
    assert data_block.instant_time == C2
    assert data_block.schema == AVRO
    assert list(data_block.records) == records
    assert {b.instant_time for b in delete_blocks} == {C3}
    # decimals come back at scale 15, which compares equal
    assert [d for b in delete_blocks for d in b.deletes] == deletes
    assert rollback.is_rollback
    assert (rollback.instant_time, rollback.target_instant_time) == (C4, C3)
    assert not data_block.is_rollback and data_block.target_instant_time is None


def test_deletes_are_grouped_into_one_block_per_ordering_type() -> None:
    same = [DeleteRecord("a", "", 1), DeleteRecord("b", "", 2)]
    assert len(read_log_blocks(encode_delete_block(C2, AVRO, same))) == 1
    natural = [DeleteRecord("a", "", None), DeleteRecord("b", "", None)]
    (block,) = read_log_blocks(encode_delete_block(C2, AVRO, natural))
    assert list(block.deletes) == natural
    mixed = [DeleteRecord("a", "", None), DeleteRecord("b", "", 7), DeleteRecord("c", "", None)]
    blocks = read_log_blocks(encode_delete_block(C2, AVRO, mixed, ordering_field="ts"))
    assert [list(b.deletes) for b in blocks] == [[mixed[0], mixed[2]], [mixed[1]]]
    (empty,) = read_log_blocks(encode_delete_block(C2, AVRO, []))
    assert empty.block_type is BlockType.DELETE and list(empty.deletes) == []


def test_torn_tail_becomes_a_corrupted_block_and_earlier_blocks_survive() -> None:
    good = encode_avro_data_block(C2, AVRO, [_row("a", 1, "x", C2)])
    torn = encode_avro_data_block(C3, AVRO, [_row("b", 1, "y", C3)])
    blocks = read_log_blocks(good + torn[: len(torn) // 2] + good)
    assert [b.block_type for b in blocks] == [
        BlockType.AVRO_DATA,
        BlockType.CORRUPTED,
        BlockType.AVRO_DATA,
    ]
    assert blocks[1].content == torn[: len(torn) // 2]
    assert read_log_blocks(b"") == []


def test_records_that_do_not_fit_the_schema_are_refused() -> None:
    with pytest.raises(LogFormatError, match="ts"):
        encode_avro_data_block(C2, AVRO, [{**_row("a", 1, "x", C2), "ts": None}])


def test_unknown_block_types_keep_their_content() -> None:
    data = encode_log_block(BlockType.CDC_DATA, {HeaderKey.INSTANT_TIME: C2}, b"raw")
    (block,) = read_log_blocks(data)
    assert block == LogBlock(BlockType.CDC_DATA, {HeaderKey.INSTANT_TIME: C2}, content=b"raw")


def test_avro_schema_follows_hudi_conventions() -> None:
    schema = _schema(
        pa.field("id", pa.string(), nullable=False),
        pa.field("n", pa.int32()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("at", pa.timestamp("us", tz="UTC")),
    )
    avro = avro_record_schema("t1", schema)
    assert (avro["name"], avro["namespace"]) == ("t1_record", "hoodie.t1")
    names = [f["name"] for f in avro["fields"]]
    assert names == [*META_FIELDS, "id", "n", "price", "at"]
    assert all(f["type"] == ["null", "string"] for f in avro["fields"][:5])
    by_name = {f["name"]: f for f in avro["fields"]}
    assert by_name["id"]["type"] == "string" and "default" not in by_name["id"]
    assert by_name["n"] == {"name": "n", "type": ["null", "int"], "default": None}
    assert by_name["price"]["type"][1] == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.t1.t1_record.price",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    assert by_name["at"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    # meta columns already in the Arrow schema are not duplicated
    assert avro_record_schema("t1", arrow_schema_from_avro(avro)) == avro


def test_arrow_records_round_trip_through_a_block() -> None:
    schema = _schema(
        pa.field("id", pa.string(), nullable=False),
        pa.field("i", pa.int32()),
        pa.field("l", pa.int64()),
        pa.field("f", pa.float32()),
        pa.field("d", pa.float64()),
        pa.field("b", pa.bool_()),
        pa.field("bin", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("price", pa.decimal128(12, 3)),
    )
    avro = avro_record_schema("t2", schema, with_meta_fields=False)
    rows = pa.Table.from_pylist(
        [
            {
                "id": "a",
                "i": 1,
                "l": 2**40,
                "f": 0.5,
                "d": 1.25,
                "b": True,
                "bin": b"\x01",
                "day": dt.date(2020, 5, 17),
                "at": dt.datetime(2021, 1, 1, 1, 2, 3, 4, tzinfo=dt.UTC),
                "local": dt.datetime(2021, 1, 1, 1, 2, 3, 4),
                "price": decimal.Decimal("3.141"),
            },
            {"id": "b"},
        ],
        schema=schema,
    )
    (block,) = read_log_blocks(encode_avro_data_block(C2, avro, table_to_avro_records(rows)))
    assert arrow_schema_from_avro(avro) == schema
    assert avro_records_to_table(block.records, schema).equals(rows)


def test_log_file_names() -> None:
    name = LogFileName(FILE_ID, C1, 12, "1-2-3")
    assert str(name) == f".{FILE_ID}_{C1}.log.12_1-2-3"
    assert LogFileName.parse(str(name)) == name
    assert LogFileName.parse(f"{FILE_ID}_{TOKEN}_{C1}.parquet") is None


# --------------------------------------------------------------------------------------------
# hudi-rs reads our blocks
# --------------------------------------------------------------------------------------------


class _Table:
    """A hand-built MOR table (version 6) with one file group in partition ``us``."""

    def __init__(self, root: Path, *, avro: dict[str, Any] = AVRO) -> None:
        self.root = root
        self.avro = avro
        props = {
            "hoodie.table.name": TABLE,
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.table.version": "6",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.precombine.field": "ts",
            "hoodie.table.partition.fields": "region",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
            "hoodie.populate.meta.fields": "true",
            "hoodie.archivelog.folder": "archived",
        }
        (root / ".hoodie").mkdir(parents=True)
        (root / ".hoodie" / "hoodie.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in props.items())
        )
        part = root / PARTITION
        part.mkdir()
        (part / ".hoodie_partition_metadata").write_text(
            f"#partition metadata\ncommitTime={C1}\npartitionDepth=1\n"
        )
        self.base_name = f"{FILE_ID}_{TOKEN}_{C1}.parquet"
        rows = [_row(k, 10, f"base-{k}", C1, i) for i, k in enumerate("abcd")]
        pq.write_table(pa.Table.from_pylist(rows, schema=FULL_SCHEMA), part / self.base_name)
        self.commit(C1, [self.base_name])

    def commit(self, instant: str, files: list[str], *, complete: bool = True) -> None:
        """Instant files of a deltacommit (requested, inflight, and completed if asked)."""
        hoodie = self.root / ".hoodie"
        (hoodie / f"{instant}.deltacommit.requested").write_bytes(b"")
        (hoodie / f"{instant}.deltacommit.inflight").write_bytes(b"")
        if not complete:
            return
        stats = [
            {"fileId": FILE_ID, "path": f"{PARTITION}/{f}", "prevCommit": C1, "numWrites": 1}
            for f in files
        ]
        metadata: dict[str, Any] = {
            "partitionToWriteStats": {PARTITION: stats},
            "compacted": False,
            "extraMetadata": {"schema": json.dumps(self.avro)},
            "operationType": "UPSERT",
        }
        (hoodie / f"{instant}.deltacommit").write_text(json.dumps(metadata))

    def log(self, version: int, *blocks: bytes, token: str = TOKEN) -> str:
        name = str(LogFileName(FILE_ID, C1, version, token))
        (self.root / PARTITION / name).write_bytes(b"".join(blocks))
        return name

    def snapshot(self) -> dict[str, tuple[int, str | None]]:
        table = hudi.HudiTable(str(self.root))
        rows = pa.Table.from_batches(table.read()).to_pylist()
        return {r[RECORD_KEY]: (r["ts"], r["v"]) for r in rows}


def _base(*keys: str) -> dict[str, tuple[int, str | None]]:
    return {k: (10, f"base-{k}") for k in keys}


def test_hudi_rs_merges_updates_by_ordering_field(tmp_path: Path) -> None:
    t = _Table(tmp_path)
    log = t.log(
        1,
        encode_avro_data_block(
            C2, AVRO, [_row("a", 20, "new-a", C2), _row("b", 5, "old-b", C2), _row("e", 1, "e", C2)]
        ),
    )
    t.commit(C2, [log])
    slices = hudi.HudiTable(str(tmp_path)).get_file_slices()
    assert [(s.base_file_name, s.log_file_names) for s in slices] == [(t.base_name, [log])]
    assert t.snapshot() == {**_base("b", "c", "d"), "a": (20, "new-a"), "e": (1, "e")}


def test_hudi_rs_applies_deletes_by_ordering_value(tmp_path: Path) -> None:
    t = _Table(tmp_path)
    deletes = [
        DeleteRecord("a", PARTITION, 20),  # newer than the base row: deleted
        DeleteRecord("b", PARTITION, 5),  # older: the row survives
        DeleteRecord("c", PARTITION, None),  # no ordering value: deleted regardless
        DeleteRecord("d", PARTITION, 10),  # equal: the delete wins
    ]
    log = t.log(1, encode_delete_block(C2, AVRO, deletes, ordering_field="ts"))
    t.commit(C2, [log])
    assert t.snapshot() == _base("b")


def test_hudi_rs_honours_rollback_blocks_and_skips_uncommitted_instants(tmp_path: Path) -> None:
    t = _Table(tmp_path)
    log = t.log(
        1,
        encode_avro_data_block(C2, AVRO, [_row("a", 20, "a@C2", C2)]),
        encode_avro_data_block(C3, AVRO, [_row("b", 20, "b@C3 rolled back", C3)]),
        encode_rollback_block(C5, C3),
        encode_avro_data_block(C4, AVRO, [_row("c", 20, "c@C4 inflight", C4)]),
        encode_delete_block(C5, AVRO, [DeleteRecord("d", PARTITION, None)]),
    )
    t.commit(C2, [log])
    t.commit(C3, [log])
    t.commit(C4, [log], complete=False)  # a failed writer's block, below the latest commit
    t.commit(C5, [log])
    assert t.snapshot() == {**_base("b", "c"), "a": (20, "a@C2")}


def test_hudi_rs_orders_log_files_by_version_then_blocks_in_file_order(tmp_path: Path) -> None:
    # Equal ordering values: the record processed last wins. Log files are processed by
    # numeric version (2 before 10), blocks in file order -- not by instant time.
    t = _Table(tmp_path)
    logs = [
        t.log(10, encode_avro_data_block(C2, AVRO, [_row("a", 30, "a@log10", C2)])),
        t.log(
            2,
            encode_avro_data_block(C3, AVRO, [_row("a", 30, "a@log2", C3)]),
            encode_avro_data_block(C3, AVRO, [_row("b", 30, "b first", C3)]),
            encode_avro_data_block(C2, AVRO, [_row("b", 30, "b second", C2)]),
        ),
    ]
    t.commit(C2, logs)
    t.commit(C3, logs)
    snapshot = t.snapshot()
    assert snapshot["a"] == (30, "a@log10")
    assert snapshot["b"] == (30, "b second")


def test_hudi_rs_file_group_reader_reads_slice_from_paths(tmp_path: Path) -> None:
    t = _Table(tmp_path)
    log = t.log(
        1,
        encode_avro_data_block(C2, AVRO, [_row("a", 11, "new-a", C2)]),
        encode_delete_block(C2, AVRO, [DeleteRecord("b", PARTITION, 99)], ordering_field="ts"),
    )
    t.commit(C2, [log])
    reader = hudi.HudiFileGroupReader(str(tmp_path))
    batch = reader.read_file_slice_from_paths(f"{PARTITION}/{t.base_name}", [f"{PARTITION}/{log}"])
    rows = {r["id"]: (r["ts"], r["v"]) for r in pa.Table.from_batches([batch]).to_pylist()}
    assert rows == {**_base("c", "d"), "a": (11, "new-a")}


def test_hudi_rs_reads_every_supported_column_type(tmp_path: Path) -> None:
    data_schema = _schema(
        pa.field("id", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("i", pa.int32()),
        pa.field("f", pa.float32()),
        pa.field("d", pa.float64()),
        pa.field("b", pa.bool_()),
        pa.field("bin", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("region", pa.string()),
    )
    avro = avro_record_schema(TABLE, data_schema)
    full = arrow_schema_from_avro(avro)

    def row(key: str, ts: int, n: int, commit: str) -> dict[str, object]:
        return {
            **{name: None for name in META_FIELDS},
            COMMIT_TIME: commit,
            RECORD_KEY: key,
            PARTITION_PATH: PARTITION,
            "id": key,
            "ts": ts,
            "i": n,
            "f": n / 2,
            "d": n / 4,
            "b": n % 2 == 0,
            "bin": bytes([n]),
            "day": dt.date(2024, 1, n),
            "at": dt.datetime(2024, 1, 1, 12, n, tzinfo=dt.UTC),
            "price": decimal.Decimal(f"{n}.25"),
            "region": PARTITION,
        }

    t = _Table(tmp_path, avro=avro)
    pq.write_table(
        pa.Table.from_pylist([row("a", 10, 1, C1), row("b", 10, 2, C1)], schema=full),
        tmp_path / PARTITION / t.base_name,
    )
    update = pa.Table.from_pylist([row("a", 20, 7, C2), row("c", 20, 8, C2)], schema=full)
    log = t.log(1, encode_avro_data_block(C2, avro, table_to_avro_records(update)))
    t.commit(C2, [log])
    out = pa.Table.from_batches(hudi.HudiTable(str(tmp_path)).read()).sort_by("id")
    expected = pa.Table.from_pylist(
        [row("a", 20, 7, C2), row("b", 10, 2, C1), row("c", 20, 8, C2)], schema=full
    )
    assert (
        out.select(data_schema.names)
        .cast(data_schema)
        .equals(expected.select(data_schema.names).cast(data_schema))
    )


def test_block_with_a_bad_trailer_is_reported_as_corrupted() -> None:
    good = bytearray(encode_rollback_block(C3, C2))
    good[-1] ^= 0xFF
    (block,) = read_log_blocks(bytes(good))
    assert block.block_type is BlockType.CORRUPTED
    assert io.BytesIO(block.content).read(6) == MAGIC


def test_a_records_trailing_bytes_are_read_past_as_hudi_reads_them() -> None:
    """A data block's records decode as one array when their bodies are exactly one record
    each; a body with bytes after its record (Hudi's reader reads each body on its own and
    skips them) is read record by record, with the same records."""
    rows = [_row("a", 1, "x", C2), _row("b", 2, "y", C2), _row("c", 3, "z", C2)]
    data = encode_avro_data_block(C2, AVRO, rows)
    (block,) = read_log_blocks(data)
    assert block.records == rows
    # find the content: after magic, length, version, type and the header's entries
    pos = 22
    (entries,) = struct.unpack(">i", data[pos : pos + 4])
    pos += 4
    for _ in range(entries):
        pos += 8 + struct.unpack(">i", data[pos + 4 : pos + 8])[0]
    (content_length,) = struct.unpack(">q", data[pos : pos + 8])
    content = data[pos + 8 : pos + 8 + content_length]
    (first_len,) = struct.unpack(">i", content[8:12])
    start = 12 + first_len
    (second_len,) = struct.unpack(">i", content[start : start + 4])
    padded_body = content[start + 4 : start + 4 + second_len] + b"\x02\x7f"
    padded = b"".join(
        [
            content[:start],
            struct.pack(">i", len(padded_body)),
            padded_body,
            content[start + 4 + second_len :],
        ]
    )
    grown = len(padded) - len(content)
    rest = data[pos + 8 + content_length : -8]
    (block_length,) = struct.unpack(">q", data[6:14])
    reframed = b"".join(
        [
            data[:6],
            struct.pack(">q", block_length + grown),
            data[14:pos],
            struct.pack(">q", len(padded)),
            padded,
            rest,
            struct.pack(">q", struct.unpack(">q", data[-8:])[0] + grown),
        ]
    )
    (read_back,) = read_log_blocks(reframed)
    assert read_back.block_type is BlockType.AVRO_DATA and read_back.records == rows
