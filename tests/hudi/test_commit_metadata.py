"""Commit metadata: Hudi's JSON (layout 1) and Avro (layout 2) forms, helpers, hudi-rs check."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi
from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.avro.jackson import dumps_jackson
from tms.hudi.avro.write_stat import NULL_COMMIT, RuntimeStats, WriteStat
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY

TS = "20240101120000123"
PREV = "20231231000000000"
FID1 = "a1b2c3d4-0000-0000-0000-000000000001-0"
FID2 = "a1b2c3d4-0000-0000-0000-000000000002-0"
BASE1 = f"{FID1}_0-5-7_{TS}.parquet"
BASE2 = f"{FID2}_1-5-8_{TS}.parquet"
LOG1 = f".{FID1}_{PREV}.log.1_0-30-40"
SCHEMA = (
    '{"type":"record","name":"trips_record","namespace":"hoodie.trips",'
    '"fields":[{"name":"uuid","type":"string"},{"name":"ts","type":"long"}]}'
)
ESCAPED_SCHEMA = json.dumps(SCHEMA)


def _template(text: str) -> str:
    """Fill @NAME@ tokens (braces stay literal, as in the JSON)."""
    tokens = {
        "FID1": FID1,
        "FID2": FID2,
        "BASE1": BASE1,
        "BASE2": BASE2,
        "PREV": PREV,
        "LOG1": LOG1,
        "SCHEMA": ESCAPED_SCHEMA,
    }
    for name, value in tokens.items():
        text = text.replace(f"@{name}@", value)
    assert "@" not in text
    return text


# A COW commit exactly as Hudi's HoodieCommitMetadata.toJsonString writes it.
COMMIT_JSON = _template(
    """{
  "partitionToWriteStats" : {
    "2024/01/01" : [ {
      "fileId" : "@FID1@",
      "path" : "2024/01/01/@BASE1@",
      "cdcStats" : null,
      "prevCommit" : "null",
      "numWrites" : 10,
      "numDeletes" : 0,
      "numUpdateWrites" : 0,
      "numInserts" : 10,
      "totalWriteBytes" : 435012,
      "totalWriteErrors" : 0,
      "tempPath" : null,
      "partitionPath" : "2024/01/01",
      "totalLogRecords" : 0,
      "totalLogFilesCompacted" : 0,
      "totalLogSizeCompacted" : 0,
      "totalUpdatedRecordsCompacted" : 0,
      "totalLogBlocks" : 0,
      "totalCorruptLogBlock" : 0,
      "totalRollbackBlocks" : 0,
      "fileSizeInBytes" : 435012,
      "minEventTime" : null,
      "maxEventTime" : null,
      "runtimeStats" : {
        "totalScanTime" : 0,
        "totalUpsertTime" : 0,
        "totalCreateTime" : 512
      }
    }, {
      "fileId" : "@FID2@",
      "path" : "2024/01/01/@BASE2@",
      "cdcStats" : null,
      "prevCommit" : "@PREV@",
      "numWrites" : 20,
      "numDeletes" : 1,
      "numUpdateWrites" : 3,
      "numInserts" : 0,
      "totalWriteBytes" : 500000,
      "totalWriteErrors" : 0,
      "tempPath" : null,
      "partitionPath" : "2024/01/01",
      "totalLogRecords" : 0,
      "totalLogFilesCompacted" : 0,
      "totalLogSizeCompacted" : 0,
      "totalUpdatedRecordsCompacted" : 0,
      "totalLogBlocks" : 0,
      "totalCorruptLogBlock" : 0,
      "totalRollbackBlocks" : 0,
      "fileSizeInBytes" : 500000,
      "minEventTime" : 1704103200000,
      "maxEventTime" : 1704110400000,
      "runtimeStats" : null
    } ]
  },
  "compacted" : false,
  "extraMetadata" : {
    "schema" : @SCHEMA@
  },
  "operationType" : "UPSERT"
}"""
)

# A MOR delta commit: HoodieDeltaWriteStat fields follow the base ones; "recordsStats" stands
# for a field a newer writer adds that we do not model.
DELTA_JSON = _template(
    """{
  "partitionToWriteStats" : {
    "" : [ {
      "fileId" : "@FID1@",
      "path" : "@LOG1@",
      "cdcStats" : { },
      "prevCommit" : "@PREV@",
      "numWrites" : 4,
      "numDeletes" : 0,
      "numUpdateWrites" : 4,
      "numInserts" : 0,
      "totalWriteBytes" : 2048,
      "totalWriteErrors" : 0,
      "tempPath" : null,
      "partitionPath" : "",
      "totalLogRecords" : 0,
      "totalLogFilesCompacted" : 0,
      "totalLogSizeCompacted" : 0,
      "totalUpdatedRecordsCompacted" : 0,
      "totalLogBlocks" : 0,
      "totalCorruptLogBlock" : 0,
      "totalRollbackBlocks" : 0,
      "fileSizeInBytes" : 2048,
      "minEventTime" : null,
      "maxEventTime" : null,
      "runtimeStats" : {
        "totalScanTime" : 0,
        "totalUpsertTime" : 33,
        "totalCreateTime" : 0
      },
      "logVersion" : 1,
      "logOffset" : 0,
      "baseFile" : "@BASE1@",
      "logFiles" : [ "@LOG1@" ],
      "recordsStats" : {
        "val" : null
      }
    } ]
  },
  "compacted" : false,
  "extraMetadata" : { },
  "operationType" : "UPSERT_PREPPED"
}"""
)

# Clustering's replacecommit: HoodieReplaceCommitMetadata adds partitionToReplaceFileIds last.
REPLACE_JSON = _template(
    """{
  "partitionToWriteStats" : {
    "2024/01/01" : [ ]
  },
  "compacted" : false,
  "extraMetadata" : { },
  "operationType" : "CLUSTER",
  "partitionToReplaceFileIds" : {
    "2024/01/01" : [ "@FID1@", "@FID2@" ]
  }
}"""
)

# Hudi 0.5 - 0.10 also serialized derived getters; they must not come back out.
LEGACY_JSON = json.dumps(
    {
        "partitionToWriteStats": {
            "p": [{"fileId": FID1, "path": f"p/{BASE1}", "prevCommit": "null", "numWrites": 5}]
        },
        "compacted": True,
        "extraMetadata": {},
        "operationType": "COMPACT",
        "fileIdAndRelativePaths": {FID1: f"p/{BASE1}"},
        "totalRecordsDeleted": 0,
        "totalLogRecordsCompacted": 9,
        "totalLogFilesCompacted": 2,
        "totalCompactedRecordsUpdated": 3,
        "totalLogFilesSize": 100,
        "totalScanTime": 0,
        "totalCreateTime": 0,
        "totalUpsertTime": 0,
        "minAndMaxEventTime": {"present": False},
        "writePartitionPaths": ["p"],
    }
)


# -- JSON (timeline layout 1) -----------------------------------------------------------------


def test_parse_hudi_commit_json() -> None:
    meta = CommitMetadata.from_json(COMMIT_JSON.encode())
    assert meta.operation_type == "UPSERT"
    assert meta.compacted is False
    assert meta.schema == SCHEMA
    assert meta.partitions() == ["2024/01/01"]
    first, second = meta.partition_to_write_stats["2024/01/01"]
    assert first.file_id == FID1
    assert first.prev_commit in (None, NULL_COMMIT) and second.prev_commit not in (
        None,
        NULL_COMMIT,
    )
    assert first.runtime_stats == RuntimeStats(total_create_time=512)
    assert first.cdc_stats is None
    assert second.prev_commit == PREV
    assert second.num_update_writes == 3
    assert second.min_event_time == 1704103200000
    assert not first.is_delta
    assert first.extra == {} and meta.extra == {}


def test_commit_json_written_byte_for_byte_like_hudi() -> None:
    assert CommitMetadata.from_json(COMMIT_JSON).to_json() == COMMIT_JSON.encode()


def test_delta_commit_json_round_trip_keeps_unknown_fields() -> None:
    meta = CommitMetadata.from_json(DELTA_JSON)
    (stat,) = meta.partition_to_write_stats[""]
    assert stat.is_delta
    assert stat.log_version == 1 and stat.log_offset == 0
    assert stat.base_file == BASE1
    assert stat.log_files == [LOG1]
    assert stat.cdc_stats == {}
    assert stat.extra == {"recordsStats": {"val": None}}
    assert meta.extra_metadata == {}
    assert meta.to_json() == DELTA_JSON.encode()


def test_replace_commit_json_round_trip() -> None:
    meta = ReplaceCommitMetadata.from_json(REPLACE_JSON)
    assert meta.operation_type == "CLUSTER"
    assert meta.replaced_file_ids() == {"2024/01/01": {FID1, FID2}}
    assert meta.write_stats() == []
    assert meta.to_json() == REPLACE_JSON.encode()


def test_legacy_json_with_derived_getters() -> None:
    meta = CommitMetadata.from_json(LEGACY_JSON)
    assert meta.compacted is True
    assert meta.operation_type == "COMPACT"
    assert meta.extra == {}
    (stat,) = meta.write_stats()
    assert stat.num_writes == 5 and stat.num_deletes == 0
    written = json.loads(meta.to_json())
    assert set(written) == {"partitionToWriteStats", "compacted", "extraMetadata", "operationType"}


def test_unknown_top_level_field_is_kept() -> None:
    raw = json.loads(COMMIT_JSON)
    raw["someFutureField"] = {"x": 1}
    meta = CommitMetadata.from_json(json.dumps(raw))
    assert meta.extra == {"someFutureField": {"x": 1}}
    assert json.loads(meta.to_json())["someFutureField"] == {"x": 1}


def test_callback_option_quirk_does_not_break_parsing() -> None:
    raw = json.loads(COMMIT_JSON)
    raw["operationType"] = {"present": True}
    assert CommitMetadata.from_json(json.dumps(raw)).operation_type == "UNKNOWN"


def test_null_counters_read_as_zero_and_missing_fields_default() -> None:
    meta = CommitMetadata.from_json(
        '{"partitionToWriteStats": {"p": [{"fileId": "f", "numWrites": null}]}}'
    )
    (stat,) = meta.write_stats()
    assert stat.num_writes == 0 and stat.path is None
    assert meta.operation_type == "UNKNOWN" and meta.extra_metadata == {}


def test_empty_content_is_an_empty_commit() -> None:
    assert CommitMetadata.from_json(b"") == CommitMetadata()
    assert CommitMetadata.from_bytes(b"") == CommitMetadata()
    assert ReplaceCommitMetadata.from_json("  \n") == ReplaceCommitMetadata()


@pytest.mark.parametrize(
    "bad",
    [
        b"{not json",
        b"[1, 2]",
        b'"text"',
        b'{"partitionToWriteStats": []}',
        b'{"partitionToWriteStats": {"p": {"fileId": "f"}}}',
        b'{"partitionToWriteStats": {"p": [{"numWrites": "many"}]}}',
        b'{"partitionToWriteStats": {"p": [{"logFiles": "x.log"}]}}',
        b'{"partitionToReplaceFileIds": {"p": "f1"}}',
        b"\xff\xfe",
    ],
)
def test_malformed_json_raises_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        ReplaceCommitMetadata.from_json(bad)


def test_jackson_pretty_printer_shapes() -> None:
    assert dumps_jackson({}) == "{ }"
    assert dumps_jackson([]) == "[ ]"
    assert dumps_jackson({"a": [1, 2], "b": {"c": None}}) == (
        '{\n  "a" : [ 1, 2 ],\n  "b" : {\n    "c" : null\n  }\n}'
    )
    assert dumps_jackson({"a": [{"b": True}]}) == '{\n  "a" : [ {\n    "b" : true\n  } ]\n}'
    assert dumps_jackson({"s": 'q"\n/é'}) == '{\n  "s" : "q\\"\\n/é"\n}'


# -- Avro (timeline layout 2) -----------------------------------------------------------------


def _full_commit() -> CommitMetadata:
    meta = CommitMetadata.from_json(COMMIT_JSON)
    meta.partition_to_write_stats["2024/01/01"][1].cdc_stats = {"cdc/file.log": 12}
    return meta


@pytest.mark.parametrize(
    ("cls", "text"),
    [(CommitMetadata, COMMIT_JSON), (CommitMetadata, DELTA_JSON), (ReplaceCommitMetadata, None)],
)
def test_avro_round_trip(cls: type[CommitMetadata], text: str | None) -> None:
    if text is None:
        meta: CommitMetadata = ReplaceCommitMetadata.from_json(REPLACE_JSON)
        meta.add_write_stat("2024/01/01", WriteStat(file_id="new-0", path="2024/01/01/n.parquet"))
    else:
        meta = cls.from_json(text)
    for stat in meta.write_stats():
        stat.extra.clear()  # JSON-only unknown fields have no Avro field
    data = meta.to_avro_bytes()
    assert avro_codec.is_avro(data)
    assert avro_codec.decode(data)["operationType"] == meta.operation_type
    assert cls.from_bytes(data) == meta
    assert cls.from_avro(avro_codec.decode(data)) == meta


def test_avro_record_fields() -> None:
    record = _full_commit().to_avro()
    assert record["version"] == 1
    stat = record["partitionToWriteStats"]["2024/01/01"][0]
    assert stat["runtimeStats"] == {
        "totalScanTime": 0,
        "totalCreateTime": 512,
        "totalUpsertTime": 0,
    }
    assert stat["logFiles"] is None and stat["logVersion"] is None
    decoded = avro_codec.decode(_full_commit().to_avro_bytes())
    second = decoded["partitionToWriteStats"]["2024/01/01"][1]
    assert second["cdcStats"] == {"cdc/file.log": 12}
    assert second["totalLogFiles"] is None


def test_replace_avro_carries_replaced_file_ids() -> None:
    meta = ReplaceCommitMetadata.from_json(REPLACE_JSON)
    decoded = avro_codec.decode(meta.to_avro_bytes())
    assert decoded["partitionToReplaceFileIds"] == {"2024/01/01": [FID1, FID2]}
    assert decoded["compacted"] is False


def test_from_avro_tolerates_old_and_extra_fields() -> None:
    record = {
        "partitionToWriteStats": {
            "p": [
                {
                    "fileId": FID1,
                    "path": f"p/{BASE1}",
                    "numWrites": None,
                    "totalLogFiles": 3,
                    "prevBaseFile": BASE2,
                    "someNewerField": 1,
                }
            ]
        },
        "extraMetadata": None,
        "version": 1,
    }
    meta = CommitMetadata.from_avro(record)
    (stat,) = meta.write_stats()
    assert stat.num_writes == 0
    assert stat.total_log_files_compacted == 3
    assert stat.extra == {"prevBaseFile": BASE2}
    assert meta.compacted is False and meta.operation_type == "UNKNOWN"
    assert stat.to_avro()["prevBaseFile"] == BASE2


def test_garbled_avro_raises_value_error() -> None:
    data = _full_commit().to_avro_bytes()
    with pytest.raises(ValueError):
        CommitMetadata.from_bytes(data[: len(data) // 2])


# -- helpers ----------------------------------------------------------------------------------


def test_helpers() -> None:
    meta = CommitMetadata.from_json(COMMIT_JSON)
    delta = CommitMetadata.from_json(DELTA_JSON)
    assert meta.file_paths_written() == [f"2024/01/01/{BASE1}", f"2024/01/01/{BASE2}"]
    assert meta.file_ids_by_partition() == {"2024/01/01": {FID1, FID2}}
    assert sum(s.num_writes for s in meta.write_stats()) == 30
    assert sum(s.total_write_bytes for s in meta.write_stats()) == 935012
    assert sum(s.num_deletes for s in meta.write_stats()) == 1
    assert meta.log_files_written() == []
    assert delta.log_files_written() == [LOG1]
    assert delta.file_ids_by_partition() == {"": {FID1}}
    compaction = CommitMetadata.from_json(LEGACY_JSON)
    compaction.write_stats()[0].total_log_files_compacted = 2
    compaction.write_stats()[0].total_log_records = 9
    assert sum(s.total_log_files_compacted for s in compaction.write_stats()) == 2
    assert sum(s.total_log_records for s in compaction.write_stats()) == 9


def test_built_compaction_commit() -> None:
    meta = CommitMetadata(compacted=True, operation_type="COMPACT")
    meta.add_write_stat(
        "p",
        WriteStat(
            file_id=FID1,
            path=f"p/{BASE1}",
            prev_commit=PREV,
            num_writes=7,
            partition_path="p",
            total_log_files_compacted=2,
        ),
    )
    written = json.loads(meta.to_json())
    assert written["compacted"] is True
    stat = written["partitionToWriteStats"]["p"][0]
    assert list(stat)[:4] == ["fileId", "path", "cdcStats", "prevCommit"]
    assert "logFiles" not in stat
    assert stat["totalLogFilesCompacted"] == 2


# -- independent reader: hudi-rs --------------------------------------------------------------


def _v8_table(base: Path, table_type: str) -> Path:
    """Bare table version 8 / timeline layout 2 table; returns the timeline folder."""
    timeline = base / ".hoodie" / "timeline"
    timeline.mkdir(parents=True)
    props = {
        "hoodie.table.name": "trips",
        "hoodie.table.type": table_type,
        "hoodie.table.version": "8",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.precombine.field": "ts",
        "hoodie.table.partition.fields": "p",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.datasource.write.hive_style_partitioning": "false",
    }
    text = "".join(f"{key}={value}\n" for key, value in props.items())
    (base / ".hoodie" / "hoodie.properties").write_text(text)
    return timeline


def _base_file(base: Path, file_id: str, instant: str, ids: list[str]) -> WriteStat:
    name = f"{file_id}_0-1-0_{instant}.parquet"
    folder = base / "a"
    folder.mkdir(exist_ok=True)
    (folder / ".hoodie_partition_metadata").write_text(f"commitTime={instant}\npartitionDepth=1\n")
    n = len(ids)
    table = pa.table(
        {
            COMMIT_TIME: [instant] * n,
            COMMIT_SEQNO: [f"{instant}_0_{i}" for i in range(n)],
            RECORD_KEY: ids,
            PARTITION_PATH: ["a"] * n,
            FILE_NAME: [name] * n,
            "id": ids,
            "ts": list(range(n)),
            "p": ["a"] * n,
        }
    )
    pq.write_table(table, folder / name)
    size = (folder / name).stat().st_size
    return WriteStat(
        file_id=file_id,
        path=f"a/{name}",
        prev_commit="null",
        num_writes=n,
        num_inserts=n,
        total_write_bytes=size,
        file_size_in_bytes=size,
        partition_path="a",
    )


TABLE_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "trips_record",
        "namespace": "hoodie.trips",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "ts", "type": "long"},
            {"name": "p", "type": "string"},
        ],
    }
)


def test_hudi_rs_reads_our_layout2_avro_commit_and_replacecommit(tmp_path: Path) -> None:
    timeline = _v8_table(tmp_path, "COPY_ON_WRITE")
    t1, c1 = "20250101000000000", "20250101000001000"
    commit = CommitMetadata(operation_type="INSERT", extra_metadata={"schema": TABLE_SCHEMA})
    commit.add_write_stat("a", _base_file(tmp_path, FID1, t1, ["1", "2"]))
    (timeline / f"{t1}.commit.requested").write_bytes(b"")
    (timeline / f"{t1}.inflight").write_bytes(b"")
    (timeline / f"{t1}_{c1}.commit").write_bytes(commit.to_avro_bytes())

    table = hudi.HudiTable(str(tmp_path))
    tl = table.get_timeline()
    (instant,) = tl.get_completed_commits()
    assert instant.timestamp == t1
    seen = json.loads(tl.get_instant_metadata_in_json(instant))
    assert seen["operationType"] == "INSERT"
    (stat,) = seen["partitionToWriteStats"]["a"]
    assert stat["fileId"] == FID1 and stat["numWrites"] == 2 and stat["prevCommit"] == "null"
    assert json.loads(tl.get_latest_avro_schema())["name"] == "trips_record"
    assert sum(batch.num_rows for batch in table.read()) == 2

    # Clustering rewrites file group 1 into file group 2; the replacecommit hides group 1.
    t2, c2 = "20250102000000000", "20250102000001000"
    plan = {
        "operationType": "CLUSTER",
        "clusteringPlan": {
            "inputGroups": [{"slices": [{"fileId": FID1, "partitionPath": "a"}]}],
            "strategy": {"strategyClassName": "SparkSortAndSizeExecutionStrategy"},
        },
    }
    (timeline / f"{t2}.clustering.requested").write_bytes(
        avro_codec.encode("HoodieRequestedReplaceMetadata", plan)
    )
    (timeline / f"{t2}.clustering.inflight").write_bytes(b"")
    replace = ReplaceCommitMetadata(
        operation_type="CLUSTER",
        extra_metadata={"schema": TABLE_SCHEMA},
        partition_to_replace_file_ids={"a": [FID1]},
    )
    replace.add_write_stat("a", _base_file(tmp_path, FID2, t2, ["1", "2"]))
    (timeline / f"{t2}_{c2}.replacecommit").write_bytes(replace.to_avro_bytes())

    table = hudi.HudiTable(str(tmp_path))
    tl = table.get_timeline()
    (instant,) = tl.get_completed_replacecommits()
    seen = json.loads(tl.get_instant_metadata_in_json(instant))
    assert seen["partitionToReplaceFileIds"] == {"a": [FID1]}
    assert [s.file_id for s in table.get_file_slices()] == [FID2]
    assert sum(batch.num_rows for batch in table.read()) == 2


def test_hudi_rs_reads_our_layout2_avro_deltacommit(tmp_path: Path) -> None:
    timeline = _v8_table(tmp_path, "MERGE_ON_READ")
    t1, c1 = "20250101000000000", "20250101000001000"
    stat = _base_file(tmp_path, FID1, t1, ["1", "2", "3"])
    assert stat.path is not None
    stat.log_version, stat.log_offset = 0, 0
    stat.base_file, stat.log_files = stat.path.rsplit("/", 1)[-1], []
    delta = CommitMetadata(operation_type="UPSERT", extra_metadata={"schema": TABLE_SCHEMA})
    delta.add_write_stat("a", stat)
    (timeline / f"{t1}.deltacommit.requested").write_bytes(b"")
    (timeline / f"{t1}.deltacommit.inflight").write_bytes(b"")
    (timeline / f"{t1}_{c1}.deltacommit").write_bytes(delta.to_avro_bytes())

    table = hudi.HudiTable(str(tmp_path))
    tl = table.get_timeline()
    (instant,) = tl.get_completed_deltacommits()
    seen = json.loads(tl.get_instant_metadata_in_json(instant))
    (seen_stat,) = seen["partitionToWriteStats"]["a"]
    assert seen_stat["baseFile"] == stat.base_file
    assert seen_stat["logFiles"] == []
    assert seen_stat["logVersion"] == 0
    assert sum(batch.num_rows for batch in table.read()) == 3
