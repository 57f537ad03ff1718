"""Merging a slice bucket by bucket through local disk gives the rows merging it in memory
gives, on randomised slices: Avro and Parquet data blocks, keys repeated across log blocks,
deletes with and without ordering values, out-of-order ordering values, a column added
between blocks, rolled back blocks, and a torn block at a log file's end. A tiny budget
forces every spill path (many buckets, buckets split again, data blocks decoded a chunk at a
time); one key's versions over the budget stop the task."""

from __future__ import annotations

import datetime as dt
import io
import random
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tms.hudi.avro.delete_records import DELETE_RECORD_LIST_SCHEMA
from tms.hudi.avro.schema import arrow_schema_from_avro, avro_record_schema
from tms.hudi.files.data import block_records, write_base_file
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.log_block import BlockType, DeleteRecord, LogBlock
from tms.hudi.files.log_reader import (
    avro_record_chunks,
    decode_delete_content,
    delete_record_chunks,
    iter_log_file,
    parquet_record_chunks,
    read_log_blocks,
)
from tms.hudi.files.log_writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_rollback_block,
)
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.files.reader import committed_blocks, read_file_slice
from tms.hudi.files.spilled_slice import (
    _KeyFilter,
    merge_file_slice,
)
from tms.hudi.memory import TaskMemoryExceeded
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.storage import Storage
from tms.spark_runtime.task_memory import REMEDY, SETTING
from tms.testing.sample_writer.log_blocks import encode_parquet_data_block

FILE_ID = "5f0c2b2e-0000-4000-8000-000000000001-0"
BASE_INSTANT = "20260101000000000"
OLD = pa.schema(
    [
        (COMMIT_TIME, pa.string()),
        (COMMIT_SEQNO, pa.string()),
        (RECORD_KEY, pa.string()),
        (PARTITION_PATH, pa.string()),
        (FILE_NAME, pa.string()),
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("fare", pa.float64()),
    ]
)
NEW = OLD.append(pa.field("note", pa.string()))
"""The table's schema after a column was added between two log blocks."""


def _rows(keys: list[str], instant: str, rng: random.Random, schema: pa.Schema) -> pa.Table:
    columns: dict[str, Any] = {
        COMMIT_TIME: [instant] * len(keys),
        COMMIT_SEQNO: [f"{instant}_0_{i}" for i in range(len(keys))],
        RECORD_KEY: keys,
        PARTITION_PATH: [""] * len(keys),
        FILE_NAME: ["f"] * len(keys),
        "id": keys,
        "ts": [rng.randrange(0, 50) for _ in keys],
        "fare": [rng.random() * 100 for _ in keys],
    }
    if "note" in schema.names:
        columns["note"] = [f"n{rng.randrange(1000)}" * rng.randrange(1, 4) for _ in keys]
    return pa.table(columns, schema=schema)


def _slice(root: Path, seed: int, keys: int = 3000) -> FileSlice:
    """A slice of random history under `root`: a base file and two log files."""
    rng = random.Random(seed)
    storage = Storage(str(root))
    universe = [f"key-{i:06d}" for i in range(keys)]
    base_name = str(BaseFileName(FILE_ID, "0-1-0", BASE_INSTANT))
    base_rows = _rows(rng.sample(universe, keys // 2), BASE_INSTANT, rng, OLD)
    write_base_file(storage, base_name, base_rows, avro_record_schema("t", OLD))
    logs = []
    instant = int(BASE_INSTANT)
    for version in (1, 2):
        data = b""
        for _ in range(rng.randrange(3, 6)):
            instant += 1
            schema = NEW if instant % 3 == 0 else OLD
            avro = avro_record_schema("t", schema)
            if rng.random() < 0.3:
                chosen = rng.sample(universe, rng.randrange(50, 400))
                deletes = [
                    DeleteRecord(k, "", rng.choice([None, rng.randrange(0, 50)])) for k in chosen
                ]
                data += encode_delete_block(str(instant), avro, deletes, ordering_field="ts")
            else:
                chosen = [rng.choice(universe) for _ in range(rng.randrange(200, 900))]
                records = _rows(chosen, str(instant), rng, schema)
                if rng.random() < 0.3:  # hoodie.logfile.data.block.format=parquet
                    data += encode_parquet_data_block(str(instant), avro, records)
                else:
                    data += encode_avro_data_block(str(instant), avro, records.to_pylist())
            if rng.random() < 0.15:
                data += encode_rollback_block(str(instant + 1), str(instant))
        if version == 2:
            data += encode_avro_data_block(str(instant + 5), avro_record_schema("t", OLD), [])[:-9]
        name = str(LogFileName(FILE_ID, BASE_INSTANT, version, "0-1-0"))
        storage.write_bytes(name, data)
        logs.append(LogFile(LogFileName.parse(name), name, len(data)))  # type: ignore[arg-type]
    base = BaseFile(BaseFileName.parse(base_name), base_name, 0)  # type: ignore[arg-type]
    return FileSlice("", FILE_ID, BASE_INSTANT, base, tuple(logs))


def _merged(root: Path, file_slice: FileSlice, budget: int) -> tuple[pa.Table, int, bool]:
    rows, log_records, spilled, _ = _merged_parts(root, file_slice, budget)
    return rows, log_records, spilled


def _merged_parts(
    root: Path, file_slice: FileSlice, budget: int
) -> tuple[pa.Table, int, bool, pa.Table]:
    """The merged rows, the log records read, whether they spilled, and the rows carried
    from the base file as they are."""
    workdir = root / f"work-{budget}"
    workdir.mkdir()
    merge = merge_file_slice(
        Storage(str(root)),
        file_slice,
        "ts",
        lambda _: True,
        budget=budget,
        workdir=str(workdir),
        schema=NEW,
    )
    parts = list(merge.parts)
    # every part has the table's columns: readers of the parts (clustering's range split)
    # take columns from each
    assert all(part.rows.schema.names == NEW.names for part in parts)
    tables = [part.rows for part in parts]
    rows = pa.concat_tables(tables) if tables else pa.table({})
    carried = [part.rows for part in parts if part.carried]
    carried_rows = pa.concat_tables(carried) if carried else NEW.empty_table()
    return rows.sort_by(RECORD_KEY), merge.log_records, merge.spilled, carried_rows


@pytest.mark.parametrize("seed", range(6))
def test_a_slice_merged_through_disk_has_the_rows_of_the_in_memory_merge(
    tmp_path: Path, seed: int
) -> None:
    file_slice = _slice(tmp_path, seed)
    expected, expected_log_records = read_file_slice(
        Storage(str(tmp_path)), file_slice, "ts", lambda _: True, NEW
    )
    expected = expected.sort_by(RECORD_KEY)
    assert expected.num_rows > 0

    in_memory, log_records, spilled = _merged(tmp_path, file_slice, budget=1 << 30)
    assert not spilled and in_memory.equals(expected)
    assert log_records == expected_log_records

    # the base rows of keys no log names are carried while the budget keeps a hash of each
    # log record and delete (at 1 MiB); past that (at 16 KiB for most seeds) by a filter of
    # an eighth of the budget, whose more frequent false yeses spill more base rows; buckets
    # are split again
    unnamed = _unnamed_base_keys(tmp_path, file_slice)
    for budget in (1 << 20, 64 * 1024, 16 * 1024):
        on_disk, log_records, spilled, carried = _merged_parts(tmp_path, file_slice, budget)
        assert spilled
        assert on_disk.equals(expected), f"budget {budget}"
        assert log_records == expected_log_records
        carried_keys = set(carried.column(RECORD_KEY).to_pylist())
        assert carried_keys and carried_keys <= unnamed, f"budget {budget}"


def _log_keys(root: Path, file_slice: FileSlice) -> set[str]:
    """The record keys the slice's committed log records and deletes name."""
    storage = Storage(str(root))
    named: set[str] = set()
    blocks = [read_log_blocks(storage.read_bytes(log.path)) for log in file_slice.log_files]
    for block in committed_blocks(blocks, lambda _: True):
        if block.block_type is BlockType.DELETE:
            named |= {d.record_key for d in block.deletes}
        else:
            named |= set(block_records(block, NEW).column(RECORD_KEY).to_pylist())
    return named


def _unnamed_base_keys(root: Path, file_slice: FileSlice) -> set[str]:
    """The base file's record keys no log record or delete names."""
    assert file_slice.base_file is not None
    base = pq.read_table(root / file_slice.base_file.path).column(RECORD_KEY).to_pylist()
    return set(base) - _log_keys(root, file_slice)


def test_base_rows_no_log_names_are_carried_as_they_are(tmp_path: Path) -> None:
    """Spilling a slice, the base file's rows whose keys no log record or delete names go
    to the new file without being spilled or merged; every row of a named key is merged."""
    file_slice = _slice(tmp_path, seed=11)
    named = _log_keys(tmp_path, file_slice)
    unnamed = _unnamed_base_keys(tmp_path, file_slice)
    assert unnamed and named

    _, _, spilled, carried = _merged_parts(tmp_path, file_slice, 1 << 20)
    carried_keys = carried.column(RECORD_KEY).to_pylist()
    assert spilled
    assert not set(carried_keys) & named
    assert len(carried_keys) == len(set(carried_keys))
    # a few unnamed keys share a slot of the filter with a named one and are merged instead
    assert len(carried_keys) >= 0.9 * len(unnamed)


def test_the_versions_of_one_key_over_the_budget_stop_the_task(
    tmp_path: Path,
) -> None:
    storage = Storage(str(tmp_path))
    rng = random.Random(7)
    avro = avro_record_schema("t", OLD)
    data = b"".join(
        encode_avro_data_block(
            str(int(BASE_INSTANT) + n),
            avro,
            _rows(["hot"] * 500, BASE_INSTANT, rng, OLD).to_pylist(),
        )
        for n in range(1, 6)
    )
    name = str(LogFileName(FILE_ID, BASE_INSTANT, 1, "0-1-0"))
    storage.write_bytes(name, data)
    log = LogFile(LogFileName.parse(name), name, len(data))  # type: ignore[arg-type]
    file_slice = FileSlice("", FILE_ID, BASE_INSTANT, None, (log,))
    workdir = tmp_path / "work"
    workdir.mkdir()
    with pytest.raises(TaskMemoryExceeded) as raised:
        merge = merge_file_slice(
            storage, file_slice, "ts", lambda _: True, budget=8 * 1024, workdir=str(workdir)
        )
        list(merge.parts)
    assert "'hot'" in str(raised.value) and "over the 8 KiB the task memory budget gives" in str(
        raised.value
    )
    assert raised.value.needed > raised.value.budget == 8 * 1024
    remedied = str(raised.value.with_remedy(REMEDY))
    assert remedied.startswith(str(raised.value)) and SETTING in remedied


@pytest.mark.parametrize("seed", range(3))
def test_reading_a_log_file_block_by_block_finds_the_blocks_of_reading_it_whole(
    tmp_path: Path, seed: int
) -> None:
    file_slice = _slice(tmp_path, seed)
    for log in file_slice.log_files:
        data = (tmp_path / log.path).read_bytes()
        data = data[:100] + b"garbage" + data[100:]  # a torn span inside the first block
        whole = read_log_blocks(data)
        streamed = list(iter_log_file(io.BytesIO(data)))
        assert [(b.block_type, dict(b.header), len(b.records), len(b.deletes)) for b in whole] == [
            (b.block_type, dict(b.header), len(b.records), len(b.deletes)) for b in streamed
        ]
        assert [b.content for b in whole] == [b.content for b in streamed]
        headers_only = list(iter_log_file(io.BytesIO(data), decode=False))
        assert [b.block_type for b in headers_only] == [b.block_type for b in whole]
        raw = list(iter_log_file(io.BytesIO(data), raw=True))  # torn spans found the same
        assert [(b.block_type, dict(b.header)) for b in raw] == [
            (b.block_type, dict(b.header)) for b in whole
        ]


def test_the_table_schema_is_the_spilled_rows_schema() -> None:
    assert arrow_schema_from_avro(avro_record_schema("t", NEW)).names == NEW.names


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_a_data_block_read_raw_is_decoded_a_chunk_at_a_time(block_format: str) -> None:
    rng = random.Random(3)
    rows = _rows([f"key-{i:05d}" for i in range(5000)], BASE_INSTANT, rng, OLD)
    avro = avro_record_schema("t", OLD)
    if block_format == "parquet":
        data = encode_parquet_data_block(BASE_INSTANT, avro, rows)
        chunks_of = parquet_record_chunks
    else:
        data = encode_avro_data_block(BASE_INSTANT, avro, rows.to_pylist())
        chunks_of = avro_record_chunks
    (block,) = iter_log_file(io.BytesIO(data), raw=True)
    assert not block.records, "read raw: nothing decoded yet"
    assert block.region is not None and not block.content, "the content is left in the file"
    assert block.content_length > len(data) // 2

    chunks = [
        block_records(LogBlock(block.block_type, block.header, records=c), OLD)
        for c in chunks_of(block, 32 * 1024)
    ]

    assert len(chunks) > 5
    assert max(chunk.nbytes for chunk in chunks) < 4 * 32 * 1024
    assert pa.concat_tables(chunks).equals(rows)


class _CountingReads(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data


def test_a_block_read_raw_or_for_its_header_is_not_read_whole() -> None:
    rng = random.Random(5)
    rows = _rows([f"key-{i:05d}" for i in range(20_000)], BASE_INSTANT, rng, OLD)
    data = encode_avro_data_block(BASE_INSTANT, avro_record_schema("t", OLD), rows.to_pylist())
    assert len(data) > 1_500_000
    headers = _CountingReads(data)
    (block,) = iter_log_file(headers, decode=False)
    assert block.instant_time == BASE_INSTANT and headers.bytes_read < len(data) / 20
    raw = _CountingReads(data)
    (block,) = iter_log_file(raw, raw=True)
    assert raw.bytes_read < len(data) / 20, "the content is read as it is decoded"
    decoded = [len(records) for records in avro_record_chunks(block, 64 * 1024)]
    assert sum(decoded) == rows.num_rows and raw.bytes_read >= len(data) * 0.95


def _deletes(rng: random.Random, count: int) -> list[DeleteRecord]:
    values: list[Any] = [None, 7, 2.5, "z", True, Decimal("1.5"), dt.date(2026, 1, 2)]
    return [
        DeleteRecord(f"key-{rng.randrange(10**6)}", f"p={rng.randrange(3)}", rng.choice(values))
        for _ in range(count)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_a_delete_block_read_raw_gives_its_deletes_a_chunk_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    avro = avro_record_schema("t", OLD)
    data = encode_delete_block(BASE_INSTANT, avro, _deletes(rng, 3000), ordering_field="ts")
    for whole, raw in zip(
        read_log_blocks(data), iter_log_file(io.BytesIO(data), raw=True), strict=True
    ):
        assert raw.region is not None and not raw.content and not raw.deletes
        chunks = list(delete_record_chunks(raw, 100))
        assert all(len(chunk) <= 100 for chunk in chunks)
        assert [d for chunk in chunks for d in chunk] == list(whole.deletes)


def test_an_array_in_sized_blocks_is_read_as_avro_writes_it() -> None:
    """Avro lets an array come in blocks whose count is negative and followed by their
    byte size; such a datum reads as the plain one does."""
    items = [{"recordKey": f"k{n}", "partitionPath": "", "orderingVal": None} for n in range(250)]
    item_schema = fastavro.parse_schema(
        {**DELETE_RECORD_LIST_SCHEMA["fields"][0]["type"]["items"], "namespace": "x"}
    )
    datum = b""
    for start in (0, 100):
        part = items[start : start + (100 if start == 0 else 150)]
        bodies = b"".join(_schemaless(item, item_schema) for item in part)
        datum += _schemaless(-len(part), "long") + _schemaless(len(bodies), "long") + bodies
    datum += _schemaless(0, "long")
    content = struct.pack(">ii", 3, len(datum)) + datum
    block = LogBlock(BlockType.DELETE, {}, content=content)
    keys = [d.record_key for chunk in delete_record_chunks(block, 64) for d in chunk]
    assert keys == [f"k{n}" for n in range(250)]
    assert decode_delete_content(content) == [
        d for chunk in delete_record_chunks(block, 64) for d in chunk
    ]


def _schemaless(record: Any, schema: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def test_the_key_filter_answers_yes_for_every_named_key_and_rarely_for_others() -> None:
    rng = np.random.default_rng(5)
    named = rng.integers(0, 2**63, size=50_000, dtype=np.uint64)
    others = rng.integers(0, 2**63, size=200_000, dtype=np.uint64)
    key_filter = _KeyFilter.sized([named[:20_000], named[20_000:]])
    assert key_filter.may_contain(named).all()
    assert key_filter.may_contain(others).mean() < 0.07
    assert not _KeyFilter.sized([]).may_contain(others).any()
    # the keys of more logs than the budget keeps hashes of: a filter of a fixed size
    bounded = _KeyFilter.within(64 * 1024)
    assert bounded.bits.nbytes == 64 * 1024 and _KeyFilter.within(100_000).bits.nbytes == 65536
    for part in np.array_split(named, 7):
        bounded.add(part)
    assert bounded.may_contain(named).all()
    assert bounded.may_contain(others).mean() < 0.1  # 50,000 keys in 524,288 bits
