"""tms's own log compaction, its pure parts: the instants a log compaction's blocks stand for
(`COMPACTED_BLOCK_TIMES`, as Hudi's `scanInternalV2` lists them), the merge of a slice's log
blocks with deletes kept as deletes, the new log file's blocks and header (read back, they
stand for the blocks they merged), its name and the delta commit's metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from tests.hudi.test_unsupported import listing
from tms.cli import app
from tms.executor_choice import AUTO, HUDI, NATIVE
from tms.hudi.actions import LOG_COMPACTION
from tms.hudi.avro.schema import arrow_schema_from_avro, avro_record_schema
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice, LogFile
from tms.hudi.files.log_block import BlockType, DeleteRecord, HeaderKey, LogBlock
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.log_writer import encode_avro_data_block, encode_delete_block
from tms.hudi.files.merge import merge_versions
from tms.hudi.files.names import LogFileName
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.files.reader import committed_blocks, merge_slice_records
from tms.hudi.meta_fields import COMMIT_TIME, FILE_NAME, META_FIELDS, RECORD_KEY
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import State
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.transitions import transition
from tms.services.log_compaction.execute import (
    CDC_ENABLED,
    LOG_COMPACT_OPERATION,
    LogCompactionExecutor,
    _Execution,
    declines,
    log_compaction_header,
    log_compaction_metadata,
    log_file_content,
)
from tms.services.log_compaction.merge import merge_log_blocks, valid_block_instants
from tms.services.log_compaction.plan import schedule_log_compaction
from tms.services.registry import table_service
from tms.services.rollback import rollback_inflight
from tms.services.table_refusals import unsupported_features
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

FILE_ID = "5f0c2b2e-0000-4000-8000-000000000002-0"
LC = "20260101000900000"
T1, T2, T3 = "20260101000100000", "20260101000200000", "20260101000300000"
DATA = pa.schema([("ts", pa.int64()), ("val", pa.string())])
AVRO = avro_record_schema("t", DATA)
SCHEMA = arrow_schema_from_avro(AVRO)


def header_block(
    instant: str, compacted: str = "", kind: BlockType = BlockType.AVRO_DATA
) -> LogBlock:
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


def row(key: str, ts: int, val: str, instant: str) -> dict[str, Any]:
    meta = dict.fromkeys(META_FIELDS, "")
    meta.update({COMMIT_TIME: instant, RECORD_KEY: key, "_hoodie_partition_path": "p"})
    meta["_hoodie_commit_seqno"] = f"{instant}_0_{key}"
    meta[FILE_NAME] = FILE_ID
    return {**meta, "ts": ts, "val": val}


def data(instant: str, rows: list[dict[str, Any]]) -> list[LogBlock]:
    return read_log_blocks(encode_avro_data_block(instant, AVRO, rows))


def deletes(instant: str, keys: list[tuple[str, int | None]]) -> list[LogBlock]:
    records = [DeleteRecord(key, "p", ts) for key, ts in keys]
    return read_log_blocks(encode_delete_block(instant, AVRO, records, ordering_field="ts"))


def execution(ordering: tuple[str, ...] = ("ts",), version: int = 9) -> _Execution:
    return _Execution(
        base_path="/nowhere",
        instant_time=LC,
        table_version=version,
        layout=TimelineLayout(2 if version >= 8 else 1, ".hoodie/timeline"),
        ordering_fields=ordering,
        avro_schema=AVRO,
        schema=SCHEMA,
        committed=frozenset({T1, T2, T3}),
        archived_before="",
    )


def test_valid_block_instants_are_listed_oldest_first_as_hudi_1_2_writes_them() -> None:
    blocks = [header_block("1"), header_block("2"), header_block("2", kind=BlockType.DELETE)]
    assert valid_block_instants(blocks, lambda _: True) == ["1", "2"]


def test_rolled_back_and_uncommitted_blocks_are_not_named() -> None:
    blocks = [header_block("1"), header_block("2"), rollback("3", "2"), header_block("4")]
    assert valid_block_instants(blocks, lambda t: t != "4") == ["1"]


def test_an_earlier_log_compaction_is_named_for_the_blocks_it_stands_for() -> None:
    # 1 and 2 log-compacted by 5, written after 3: 5 is named where 2 was, after 3
    blocks = [header_block("1"), header_block("2"), header_block("3"), header_block("5", "2,1")]
    assert valid_block_instants(blocks, lambda _: True) == ["5", "3"]
    # a nested one: 7 stood for 5 and 3, so 7 is named for all of them
    nested = [*blocks, header_block("7", "5,3"), header_block("6")]
    assert valid_block_instants(nested, lambda _: True) == ["7", "6"]


def test_merged_logs_keep_the_last_word_of_each_key() -> None:
    blocks = [
        *data("1", [row("a", 1, "a1", "1"), row("b", 5, "b1", "1"), row("c", 1, "c1", "1")]),
        *data("2", [row("a", 2, "a2", "2")]),
        *deletes("3", [("b", 3), ("c", None), ("d", 7)]),  # b's delete loses to ts 5
        *data("4", [row("e", 1, "e4", "4")]),
    ]
    merged = merge_log_blocks(blocks, lambda _: True, ("ts",), SCHEMA, "p")
    rows = {r[RECORD_KEY]: (r["ts"], r["val"], r[COMMIT_TIME]) for r in merged.rows.to_pylist()}
    assert rows == {"a": (2, "a2", "2"), "b": (5, "b1", "1"), "e": (1, "e4", "4")}
    assert sorted((d.record_key, d.ordering_value) for d in merged.deletes) == [
        ("c", None),
        ("d", 7),
    ]
    assert merged.log_records == 8 and merged.log_blocks == len(blocks)


def test_a_record_after_a_natural_delete_comes_back_and_commit_time_ordering_ignores_values() -> (
    None
):
    blocks = [
        *data("1", [row("a", 9, "a1", "1"), row("b", 9, "b1", "1")]),
        *deletes("2", [("a", None), ("b", 1)]),
        *data("3", [row("a", 1, "a3", "3")]),
    ]
    merged = merge_log_blocks(blocks, lambda _: True, ("ts",), SCHEMA, "p")
    assert [r["val"] for r in merged.rows.to_pylist()] == ["b1", "a3"]
    assert merged.deletes == []
    by_commit_time = merge_log_blocks(blocks, lambda _: True, (), SCHEMA, "p")
    assert [r["val"] for r in by_commit_time.rows.to_pylist()] == ["a3"]
    assert [(d.record_key, d.ordering_value) for d in by_commit_time.deletes] == [("b", 1)]


def test_the_new_log_file_stands_for_the_blocks_it_merged_and_reads_the_same() -> None:
    base = pa.Table.from_pylist(
        [row("a", 0, "a0", "0"), row("b", 0, "b0", "0"), row("z", 0, "z0", "0")], SCHEMA
    )
    old = [
        *data(T1, [row("a", 1, "a1", T1), row("b", 1, "b1", T1)]),
        *deletes(T2, [("b", 2), ("z", 0)]),
        *data(T3, [row("c", 1, "c3", T3)]),
    ]
    committed = execution().is_committed
    merged = merge_log_blocks(old, committed, ("ts",), SCHEMA, "p")
    valid = valid_block_instants(old, committed)
    new = read_log_blocks(log_file_content(execution(), FILE_ID, merged, valid))
    assert [b.block_type for b in new] == [BlockType.AVRO_DATA, BlockType.DELETE]
    for block in new:
        assert block.header[HeaderKey.INSTANT_TIME] == LC
        assert block.header[HeaderKey.COMPACTED_BLOCK_TIMES] == f"{T1},{T2},{T3}"
        assert HeaderKey.SCHEMA in block.header
    records = list(new[0].records)  # type: ignore[arg-type]
    assert {(r[FILE_NAME], r[COMMIT_TIME]) for r in records} == {(FILE_ID, LC)}
    assert sorted(r["_hoodie_commit_seqno"] for r in records) == [f"{LC}_0_1", f"{LC}_0_2"]

    def is_committed(t: str) -> bool:
        return t <= LC

    before, _ = merge_slice_records(base, committed_blocks([old], is_committed), "ts", SCHEMA)
    after_blocks = committed_blocks([old, new], is_committed)
    assert [b.instant_time for b in after_blocks] == [LC, LC]
    after, _ = merge_slice_records(base, after_blocks, "ts", SCHEMA)
    columns = [RECORD_KEY, "ts", "val"]  # the commit time is the log compaction's now
    assert sorted(after.select(columns).to_pylist(), key=str) == sorted(
        before.select(columns).to_pylist(), key=str
    )
    assert sorted(after.column(RECORD_KEY).to_pylist()) == ["a", "c"]


def test_the_header_joins_the_instants_as_hudi_does() -> None:
    assert log_compaction_header(["3", "2"]) == {HeaderKey.COMPACTED_BLOCK_TIMES: "3,2"}


def test_the_new_log_file_is_named_in_its_slice() -> None:
    logs = tuple(
        LogFile(LogFileName(FILE_ID, "20260101000000000", v, "0-1-2"), f"p/{v}", 1) for v in (1, 2)
    )
    piece = FileSlice("p", FILE_ID, "20260101000000000", None, logs)
    v6 = next_log_file_name(TimelineLayout(1, ".hoodie"), piece, LC, "3-4-5")
    assert str(v6) == f".{FILE_ID}_20260101000000000.log.3_3-4-5"
    v9 = next_log_file_name(TimelineLayout(2, ".hoodie/timeline"), piece, LC, "3-4-5")
    assert str(v9) == f".{FILE_ID}_{LC}.log.1_3-4-5"


def test_the_delta_commit_is_a_compacted_log_compact() -> None:
    plan = {"extraMetadata": {"checkpoint": "x"}}
    metadata = log_compaction_metadata(plan, {"schema": "{}"})
    assert metadata.compacted and metadata.operation_type == LOG_COMPACT_OPERATION == "LOG_COMPACT"
    assert metadata.extra_metadata == {"schema": "{}", "checkpoint": "x"}


def test_merge_versions_agrees_when_no_delete_has_the_last_word() -> None:
    blocks = data("1", [row("a", 1, "a1", "1")]) + data("2", [row("a", 0, "a2", "2")])
    merged = merge_log_blocks(blocks, lambda _: True, ("ts",), SCHEMA, "p")
    both = pa.concat_tables([pa.Table.from_pylist(list(b.records), SCHEMA) for b in blocks])  # type: ignore[arg-type]
    assert merged.rows.to_pylist() == merge_versions(both, [1, 2], [], "ts").to_pylist()


# What native declines, before anything is written ---------------------------------------------


def sample_table(
    tmp_path: Path, metadata: tuple[str, ...] = (), extra: dict[str, str] | None = None
) -> HudiTable:
    """A merge-on-read table written by the sample writer: an insert and an update."""
    table = create_table(
        str(tmp_path / "trips"),
        "trips",
        record_key_fields=["id"],
        ordering_field="ts",
        table_version=9,
        metadata_partitions=metadata,
        extra_properties=extra,
    )
    writer = HudiWriter(table)
    rows = pa.table({"id": ["a", "b"], "ts": pa.array([1, 1], pa.int64()), "v": ["x", "y"]})
    writer.upsert(rows)
    writer.upsert(rows.set_column(1, "ts", pa.array([2, 2], pa.int64())))
    return HudiTable.open(str(tmp_path / "trips"))


def test_native_serves_a_table_whose_metadata_table_has_files_alone(tmp_path: Path) -> None:
    assert declines(sample_table(tmp_path, ("files",))) == []


def test_native_declines_metadata_partitions_it_cannot_write_for_log_files(
    tmp_path: Path,
) -> None:
    table = sample_table(tmp_path, ("files", "record_index"))
    (reason,) = declines(table)
    assert "record_index" in reason and "executor auto or hudi" in reason
    decision = table_service(LOG_COMPACTION).decide(table, AUTO)
    assert decision.executor == HUDI and decision.native_declined == reason
    with pytest.raises(UnsupportedTableError, match="record_index"):
        LogCompactionExecutor().refuse(table, table.timeline())
    with pytest.raises(UnsupportedTableError, match="record_index"):
        table_service(LOG_COMPACTION).decide(table, NATIVE)


def test_tms_run_native_on_a_table_native_declines_writes_no_plan(tmp_path: Path) -> None:
    """Asked for by name, native is refused before the plan is written, so no plan is left
    pending to hold the table's other services off."""
    table = sample_table(tmp_path, ("files", "record_index"))
    before = listing(table.base_path)
    result = CliRunner().invoke(
        app,
        ["run", "logcompaction", "--base-path", table.base_path, "--executor", "native",
         "--log-blocks-threshold", "1"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "record_index" in result.stderr
    assert listing(table.base_path) == before


def test_native_declines_cdc_and_a_pending_log_compaction_does_not_hold_it_off(
    tmp_path: Path,
) -> None:
    table = sample_table(tmp_path, extra={CDC_ENABLED: "true"})
    assert [r for r in declines(table) if "CDC" in r]
    plain = sample_table(tmp_path / "plain")
    planned = schedule_log_compaction(plain, log_blocks_threshold=1)
    assert planned is not None
    assert any("is pending" in r for r in unsupported_features(plain))  # the other services
    assert declines(plain) == []
    assert table_service(LOG_COMPACTION).decide(plain, AUTO).executor == NATIVE


@pytest.mark.parametrize("keep_plan", [False, True], ids=["hudis-way", "tms-native"])
def test_a_rolled_back_log_compaction_keeps_its_plan_only_for_tms_own_executor(
    tmp_path: Path, keep_plan: bool
) -> None:
    """Hudi's code rolls a log compaction back with its plan; tms's own executor rolls it back
    to its plan and runs it again (its rollback deletes the files, voiding no instant)."""
    table = sample_table(tmp_path)
    planned = schedule_log_compaction(table, log_blocks_threshold=1)
    assert planned is not None
    requested = table.timeline().get(planned)
    assert requested is not None
    inflight = transition(table.storage, table.config, requested, State.INFLIGHT)
    rollback_inflight(table, inflight, heartbeat_interval=0.01, keep_plan=keep_plan)
    left = table.timeline().get(planned)
    if keep_plan:
        assert left is not None and left.state is State.REQUESTED
    else:
        assert left is None
