"""A slice whose log files a log compaction rewrote (RFC-48): its blocks stand for the blocks
whose instants their `COMPACTED_BLOCK_TIMES` header names, which the merge leaves out, and it
is applied where the newest of those was (Hudi's `scanInternalV2`). So a delta commit the log
compaction did not include still wins over it under commit-time ordering, nested log
compactions stand for what the earlier one stood for, and a log compaction rolled back or not
yet complete stands for nothing. The merge through local disk applies the same order."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.files.fs_view import FileSlice, LogFile
from tms.hudi.files.log_block import BlockType, DeleteRecord, HeaderKey, LogBlock
from tms.hudi.files.log_reader import iter_log_file
from tms.hudi.files.log_writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_log_block,
)
from tms.hudi.files.names import LogFileName
from tms.hudi.files.reader import merge_order, read_file_slice
from tms.hudi.files.spilled_slice import merge_file_slice
from tms.hudi.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    PARTITION_PATH,
    RECORD_KEY,
)
from tms.hudi.storage import Storage

FILE_ID = "5f0c2b2e-0000-4000-8000-000000000002-0"
BASE_INSTANT = "20260101000000000"
SCHEMA = pa.schema(
    [*((name, pa.string()) for name in META_FIELDS), ("ts", pa.int64()), ("val", pa.string())]
)
AVRO = avro_record_schema("t", SCHEMA)


def block(instant: str, compacted: str = "", kind: BlockType = BlockType.AVRO_DATA) -> LogBlock:
    header = {HeaderKey.INSTANT_TIME: instant}
    if compacted:
        header[HeaderKey.COMPACTED_BLOCK_TIMES] = compacted
    return LogBlock(kind, header)


def rollback(instant: str, target: str) -> LogBlock:
    return LogBlock(
        BlockType.COMMAND,
        {
            HeaderKey.INSTANT_TIME: instant,
            HeaderKey.TARGET_INSTANT_TIME: target,
            HeaderKey.COMMAND_BLOCK_TYPE: "0",
        },
    )


def instants(blocks: list[LogBlock], committed: set[str] | None = None) -> list[str]:
    order = merge_order(blocks, lambda t: committed is None or t in committed)
    return [blocks[i].instant_time for i in order]


def test_a_log_compaction_stands_for_the_blocks_it_names() -> None:
    blocks = [block("1"), block("2"), block("3", "1,2"), block("3", "1,2", BlockType.DELETE)]
    assert instants(blocks) == ["3", "3"]
    assert merge_order(blocks, lambda _: True) == [2, 3]  # its data block, then its deletes


def test_a_log_compaction_is_applied_where_the_newest_block_it_names_was() -> None:
    # 2 completed after the log compaction was planned: 3 does not stand for it
    assert instants([block("1"), block("2"), block("3", "1")]) == ["3", "2"]
    assert instants([block("1"), block("2"), block("4"), block("3", "1,2")]) == ["3", "4"]


def test_a_later_log_compaction_stands_for_what_an_earlier_one_stood_for() -> None:
    blocks = [block("1"), block("2"), block("3", "1,2"), block("4"), block("5", "3,4")]
    assert instants(blocks) == ["5"]
    assert instants([*blocks, block("6")]) == ["5", "6"]


def test_a_log_compaction_rolled_back_or_not_complete_stands_for_nothing() -> None:
    blocks = [block("1"), block("2"), block("3", "1,2")]
    assert instants(blocks, committed={"1", "2"}) == ["1", "2"]
    assert instants([*blocks, rollback("4", "3")]) == ["1", "2"]


def test_a_log_compaction_whose_blocks_are_elsewhere_is_applied_where_it_is() -> None:
    assert instants([block("1"), block("3", "2"), block("4")]) == ["1", "3", "4"]


# A slice on disk, merged in memory and through local disk -------------------------------


def _rows(instant: str, values: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    return [
        {
            COMMIT_TIME: instant,
            COMMIT_SEQNO: f"{instant}_0_{i}",
            RECORD_KEY: key,
            PARTITION_PATH: "",
            FILE_NAME: "f",
            "ts": ts,
            "val": val,
        }
        for i, (key, (ts, val)) in enumerate(values.items())
    ]


def _compacted(encoded: bytes, times: str) -> bytes:
    """The blocks of `encoded` as a log compaction writes them: headed by the instants they
    stand for."""
    out = b""
    with io.BytesIO(encoded) as handle:
        for found in iter_log_file(handle, raw=True):
            content = found.content_stream(buffered=False).read()
            header = {**found.header, HeaderKey.COMPACTED_BLOCK_TIMES: times}
            out += encode_log_block(found.block_type, header, content, found.footer)
    return out


def _slice(root: Path, files: list[bytes]) -> FileSlice:
    storage = Storage(str(root))
    logs = []
    for version, data in enumerate(files, start=1):
        name = str(LogFileName(FILE_ID, BASE_INSTANT, version, "0-1-0"))
        storage.write_bytes(name, data)
        logs.append(LogFile(LogFileName.parse(name), name, len(data)))  # type: ignore[arg-type]
    return FileSlice("", FILE_ID, BASE_INSTANT, None, tuple(logs))


@pytest.mark.parametrize("ordering", ["ts", None], ids=["event-time", "commit-time"])
def test_a_log_compacted_slice_merges_alike_in_memory_and_through_disk(
    tmp_path: Path, ordering: str | None
) -> None:
    """Instant 1 (records and a delete) was log-compacted into 3; 2 completed after the plan
    and its file comes between them. 3 is applied where 1 was: under commit-time ordering
    2's value of `b` wins over 3's, under event-time ordering 3's larger ordering value does;
    the deleted key stays deleted; 5 comes after all. Read block by block in file order, 3
    would win under both."""
    keys = [f"k{i:03d}" for i in range(300)]
    first = {**{k: (1, "one") for k in keys}, "b": (1, "one"), "gone": (1, "x")}
    kept = {k: v for k, v in first.items() if k != "gone"}
    gone = [DeleteRecord("gone", "", None)]
    files = [
        encode_avro_data_block("1", AVRO, _rows("1", first))
        + encode_delete_block("1", AVRO, gone, ordering_field="ts"),
        encode_avro_data_block("2", AVRO, _rows("2", {"b": (0, "two")})),
        _compacted(
            encode_avro_data_block("3", AVRO, _rows("3", kept))
            + encode_delete_block("3", AVRO, gone, ordering_field="ts"),
            "1",
        ),
        encode_avro_data_block("5", AVRO, _rows("5", {keys[-1]: (2, "five")})),
    ]
    file_slice = _slice(tmp_path, files)
    storage = Storage(str(tmp_path))
    expected, _ = read_file_slice(storage, file_slice, ordering, lambda _: True, SCHEMA)
    expected = expected.sort_by(RECORD_KEY)
    keys_read, vals = expected.column(RECORD_KEY).to_pylist(), expected.column("val").to_pylist()
    values = dict(zip(keys_read, vals, strict=True))
    assert "gone" not in values and len(values) == len(keys) + 1
    assert values[keys[0]] == "one" and values[keys[-1]] == "five"
    assert values["b"] == ("two" if ordering is None else "one")
    written_by = set(expected.column(COMMIT_TIME).to_pylist())
    assert written_by == ({"3", "5"} if ordering else {"2", "3", "5"})

    for budget in (1 << 30, 16 * 1024):
        workdir = tmp_path / f"work-{budget}"
        workdir.mkdir()
        merge = merge_file_slice(
            storage,
            file_slice,
            ordering,
            lambda _: True,
            budget=budget,
            workdir=str(workdir),
            schema=SCHEMA,
        )
        on_disk = pa.concat_tables([part.rows for part in merge.parts]).sort_by(RECORD_KEY)
        assert merge.spilled is (budget < 1 << 30)
        assert on_disk.equals(expected), f"budget {budget}"
