"""Merging a slice bucket by bucket through local disk gives the rows merging it in memory
gives, on randomised slices: keys repeated across log blocks, deletes with and without
ordering values, out-of-order ordering values, a column added between blocks, rolled back
blocks, and a torn block at a log file's end. A tiny budget forces every spill path (many
buckets, buckets split again); one key's versions over the budget stop the task."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tms.hudi.avro.schema import arrow_schema_from_avro, avro_record_schema
from tms.hudi.files.data import write_base_file
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.log_block import DeleteRecord
from tms.hudi.files.log_reader import iter_log_file, read_log_blocks
from tms.hudi.files.log_writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_rollback_block,
)
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.files.reader import read_file_slice
from tms.hudi.files.spilled_slice import merge_file_slice
from tms.hudi.memory import TaskMemoryExceeded
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.storage import Storage
from tms.spark_runtime.task_memory import REMEDY, SETTING

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
    parts = [part.rows for part in merge.parts]
    rows = pa.concat_tables([p for p in parts if p.num_columns]) if parts else pa.table({})
    return rows.sort_by(RECORD_KEY), merge.log_records, merge.spilled


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

    for budget in (64 * 1024, 16 * 1024):  # 16 KiB: buckets are split again
        on_disk, log_records, spilled = _merged(tmp_path, file_slice, budget)
        assert spilled
        assert on_disk.equals(expected), f"budget {budget}"
        assert log_records == expected_log_records


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
    assert "'hot'" in str(raised.value) and "budget of 8 KiB" in str(raised.value)
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


def test_the_table_schema_is_the_spilled_rows_schema() -> None:
    assert arrow_schema_from_avro(avro_record_schema("t", NEW)).names == NEW.names
