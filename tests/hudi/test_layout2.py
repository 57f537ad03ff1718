"""Tables of version 8 and 9 (timeline layout 2), built by hand: our timeline, file-system view
and CLI against the oracle, and the services' refusal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests import oracle
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.data import write_base_file, write_log_file, write_partition_metadata
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.services.table_refusals import ensure_supported, unsupported_features

TIMELINE = ".hoodie/timeline"
SCHEMA = pa.schema(
    [
        (COMMIT_TIME, pa.string()),
        (COMMIT_SEQNO, pa.string()),
        (RECORD_KEY, pa.string()),
        (PARTITION_PATH, pa.string()),
        (FILE_NAME, pa.string()),
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("part", pa.string()),
    ]
)
AVRO_SCHEMA = avro_record_schema("v2", SCHEMA)

# Requested and completion times. T4 is requested before the compaction T3 but completes after
# it, so its log file belongs to the slice T3 starts (layout 2 slices by completion time).
T0 = "20240301100000000"  # legacy JSON instant: no completion time in its name
T1, C1 = "20240301100100000", "20240301100101000"
T2, C2 = "20240301100200000", "20240301100201000"
T4 = "20240301100300000"
T3, C3 = "20240301100400000", "20240301100401000"
C4 = "20240301100402000"
T5 = "20240301100500000"  # pending delta commit
T6 = "20240301100600000"  # pending clustering
T7, C7 = "20240301100700000", "20240301100701000"  # completed clustering

FILE_A = "aaaaaaaa-0000-0000-0000-000000000000-0"
FILE_B = "bbbbbbbb-0000-0000-0000-000000000000-0"
FILE_C = "cccccccc-0000-0000-0000-000000000000-0"
FILE_D = "dddddddd-0000-0000-0000-000000000000-0"


def records(instant: str, file_name: str, part: str, values: list[tuple[str, int]]) -> pa.Table:
    return pa.table(
        {
            COMMIT_TIME: [instant] * len(values),
            COMMIT_SEQNO: [f"{instant}_0_{i}" for i in range(len(values))],
            RECORD_KEY: [key for key, _ in values],
            PARTITION_PATH: [part] * len(values),
            FILE_NAME: [file_name] * len(values),
            "id": [key for key, _ in values],
            "ts": [ts for _, ts in values],
            "part": [part] * len(values),
        },
        schema=SCHEMA,
    )


@dataclass
class Layout2Table:
    base: str
    storage: Storage

    def instant(self, name: str, content: bytes = b"") -> None:
        self.storage.write_bytes(f"{TIMELINE}/{name}", content)

    def base_file(
        self, part: str, file_id: str, instant: str, values: list[tuple[str, int]]
    ) -> WriteStat:
        name = str(BaseFileName(file_id, "0-1-0", instant))
        path = f"{part}/{name}"
        size = write_base_file(self.storage, path, records(instant, name, part, values))
        return WriteStat(
            file_id=file_id,
            path=path,
            prev_commit="null",
            partition_path=part,
            num_writes=len(values),
            num_inserts=len(values),
            total_write_bytes=size,
            file_size_in_bytes=size,
        )

    def log_file(
        self, part: str, file_id: str, instant: str, values: list[tuple[str, int]]
    ) -> WriteStat:
        name = str(LogFileName(file_id, instant, 1, "0-1-0"))
        path = f"{part}/{name}"
        rows = records(instant, file_id, part, values)
        size = write_log_file(self.storage, path, instant, AVRO_SCHEMA, records=rows)
        return WriteStat(
            file_id=file_id,
            path=path,
            prev_commit=instant,
            partition_path=part,
            num_writes=len(values),
            num_update_writes=len(values),
            total_write_bytes=size,
            file_size_in_bytes=size,
            log_version=1,
            log_offset=0,
            log_files=[name],
        )


def metadata(
    operation: str, stats: list[WriteStat], cls: type[CommitMetadata] = CommitMetadata, **kw: Any
) -> CommitMetadata:
    result = cls(operation_type=operation, extra_metadata={"schema": json.dumps(AVRO_SCHEMA)}, **kw)
    for stat in stats:
        result.add_write_stat(stat.partition_path or "", stat)
    return result


def new_table(base: str, version: int) -> Layout2Table:
    """An empty merge-on-read table of that version, partitions p1 and p2."""
    storage = Storage(base)
    TableConfig(
        {
            "hoodie.table.name": "v2",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.table.version": str(version),
            "hoodie.table.initial.version": str(version),
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.precombine.field": "ts",
            "hoodie.table.ordering.fields": "ts",
            "hoodie.table.partition.fields": "part",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
            "hoodie.table.keygenerator.type": "SIMPLE",
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.populate.meta.fields": "true",
            "hoodie.table.metadata.partitions": "",
            "hoodie.database.name": "default",
        }
    ).save(storage)
    storage.makedirs(f"{TIMELINE}/history")
    table = Layout2Table(base, storage)
    for part in ("p1", "p2"):
        write_partition_metadata(storage, part, T0)
    return table


def build_table(base: str, version: int) -> Layout2Table:
    table = new_table(base, version)

    # T0: a legacy instant (Hudi 1.x reads `<ts>.<action>` with JSON metadata in layout 2; the
    # oracle, hudi-rs, skips it). Its only file group C is clustered away by T7 below.
    legacy = [table.base_file("p2", FILE_C, T0, [("c1", 0)])]
    table.instant(f"{T0}.deltacommit.requested")
    table.instant(f"{T0}.deltacommit.inflight")
    table.instant(f"{T0}.deltacommit", metadata("INSERT", legacy).to_json())

    # T1 inserts A and B, T2 updates A in a log file.
    for ts, done, stats in (
        (
            T1,
            C1,
            [
                table.base_file("p1", FILE_A, T1, [("a1", 1), ("a2", 1)]),
                table.base_file("p2", FILE_B, T1, [("b1", 1)]),
            ],
        ),
        (T2, C2, [table.log_file("p1", FILE_A, T2, [("a1", 2)])]),
    ):
        table.instant(f"{ts}.deltacommit.requested")
        table.instant(f"{ts}.deltacommit.inflight")
        table.instant(f"{ts}_{done}.deltacommit", metadata("UPSERT", stats).to_avro_bytes())

    # T4 starts; T3 compacts A (base T1 + log T2) and completes; then T4 completes.
    table.instant(f"{T4}.deltacommit.requested")
    table.instant(f"{T4}.deltacommit.inflight")
    plan = {
        "operations": [
            {
                "baseInstantTime": T1,
                "fileId": FILE_A,
                "partitionPath": "p1",
                "dataFilePath": str(BaseFileName(FILE_A, "0-1-0", T1)),
                "deltaFilePaths": [str(LogFileName(FILE_A, T2, 1, "0-1-0"))],
            }
        ],
        "version": 2,
    }
    table.instant(f"{T3}.compaction.requested", avro_codec.encode("HoodieCompactionPlan", plan))
    table.instant(f"{T3}.compaction.inflight")
    compacted = table.base_file("p1", FILE_A, T3, [("a1", 2), ("a2", 1)])
    compaction = metadata("COMPACT", [compacted], compacted=True)
    table.instant(f"{T3}_{C3}.commit", compaction.to_avro_bytes())
    late = table.log_file("p1", FILE_A, T4, [("a2", 4)])
    table.instant(f"{T4}_{C4}.deltacommit", metadata("UPSERT", [late]).to_avro_bytes())

    # T5: a delta commit still in flight, its log file already written.
    table.instant(f"{T5}.deltacommit.requested")
    table.instant(f"{T5}.deltacommit.inflight")
    table.log_file("p1", FILE_A, T5, [("a1", 5)])

    # T6: a pending clustering of B; T7: a completed clustering of C into D.
    for ts, file_id, created in ((T6, FILE_B, T1), (T7, FILE_C, T0)):
        requested = {
            "operationType": "CLUSTER",
            "clusteringPlan": {
                "inputGroups": [
                    {
                        "slices": [
                            {
                                "dataFilePath": f"p2/{BaseFileName(file_id, '0-1-0', created)}",
                                "fileId": file_id,
                                "partitionPath": "p2",
                            }
                        ],
                        "numOutputFileGroups": 1,
                    }
                ]
            },
        }
        table.instant(
            f"{ts}.clustering.requested",
            avro_codec.encode("HoodieRequestedReplaceMetadata", requested),
        )
        table.instant(f"{ts}.clustering.inflight")
    clustered = table.base_file("p2", FILE_D, T7, [("c1", 0)])
    replace = metadata(
        "CLUSTER",
        [clustered],
        ReplaceCommitMetadata,
        partition_to_replace_file_ids={"p2": [FILE_C]},
    )
    table.instant(f"{T7}_{C7}.replacecommit", replace.to_avro_bytes())
    return table


@pytest.fixture(params=[8, 9])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Layout2Table:
    return build_table(str(tmp_path / f"v{request.param}"), request.param)


def test_the_oracle_reads_the_hand_built_table(table: Layout2Table) -> None:
    got = {key: row["ts"] for key, row in oracle.rows_by_key(table.base).items()}
    assert got == {"a1": 2, "a2": 4, "b1": 1, "c1": 0}


def test_timeline_gives_requested_and_completion_times(table: Layout2Table) -> None:
    hudi = HudiTable.open(table.base)
    assert hudi.config.timeline_layout_version == 2
    assert hudi.config.timeline_path == TIMELINE
    timeline = hudi.timeline()
    got = [(i.requested_time, i.action, i.state, i.completion_time) for i in timeline.instants]
    assert got == [
        (T0, Action.DELTA_COMMIT, State.COMPLETED, None),
        (T1, Action.DELTA_COMMIT, State.COMPLETED, C1),
        (T2, Action.DELTA_COMMIT, State.COMPLETED, C2),
        (T4, Action.DELTA_COMMIT, State.COMPLETED, C4),
        (T3, Action.COMMIT, State.COMPLETED, C3),
        (T5, Action.DELTA_COMMIT, State.INFLIGHT, None),
        (T6, Action.CLUSTERING, State.INFLIGHT, None),
        (T7, Action.REPLACE_COMMIT, State.COMPLETED, C7),
    ]
    by_time = {i.requested_time: i for i in timeline.instants}
    assert timeline.origin_action(by_time[T3]) is Action.COMPACTION
    assert timeline.last_compaction() == by_time[T3]
    assert timeline.compaction_plan(by_time[T3])["operations"][0]["fileId"] == FILE_A
    assert timeline.origin_action(by_time[T7]) is Action.CLUSTERING
    assert timeline.last_clustering() == by_time[T7]
    assert timeline.pending_clusterings() == [by_time[T6]]
    assert timeline.clustering_plan(by_time[T6])["inputGroups"][0]["slices"][0]["fileId"] == (
        FILE_B
    )
    assert timeline.pending_compactions() == []

    # Avro metadata (layout 2) and the legacy JSON instant both decode.
    assert timeline.commit_metadata(by_time[T3]).compacted
    assert sum(s.num_writes for s in timeline.commit_metadata(by_time[T1]).write_stats()) == 3
    assert timeline.commit_metadata(by_time[T0]).file_ids_by_partition() == {"p2": {FILE_C}}
    replaced = timeline.commit_metadata(by_time[T7])
    assert isinstance(replaced, ReplaceCommitMetadata)
    assert replaced.partition_to_replace_file_ids == {"p2": [FILE_C]}


def test_file_slices_follow_completion_times(table: Layout2Table) -> None:
    view = HudiTable.open(table.base).file_system_view()
    latest = {s.file_id: s for s in view.latest_file_slices()}
    assert sorted(latest) == [FILE_A, FILE_B, FILE_D]  # C was clustered away
    a = latest[FILE_A]
    assert a.base_instant_time == T3
    assert a.base_file is not None and a.base_file.name.instant_time == T3
    # T4's log completed after T3 started: it is in T3's slice; T5's log is not committed.
    assert [log.name.base_instant_time for log in a.log_files] == [T4]
    group_a = next(g for g in view.file_groups if g.file_id == FILE_A)
    assert [
        (s.base_instant_time, [log.name.base_instant_time for log in s.log_files])
        for s in group_a.slices
    ] == [(T1, [T2]), (T3, [T4])]


def cli_json(command: str, base: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, [command, "--base-path", base, "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_cli_timeline_agrees_with_the_oracle(table: Layout2Table) -> None:
    shown = cli_json("timeline", table.base)
    assert shown["table_version"] == int(Path(table.base).name[1:])
    commits = sorted(
        (row["instant"], row["action"])
        for row in shown["instants"]
        if row["state"] == "COMPLETED"
        and row["action"] in ("commit", "deltacommit", "replacecommit")
    )
    # hudi-rs 0.5 skips legacy instants (no completion time in the name) that Hudi 1.x reads
    assert [c for c in commits if c[0] != T0] == oracle.completed_instants(table.base)
    assert (T0, "deltacommit") in commits
    completion = {row["instant"]: row["completion_time"] for row in shown["instants"]}
    assert (completion[T1], completion[T3], completion[T5]) == (C1, C3, None)
    requested_as = {row["instant"]: row["requested_as"] for row in shown["instants"]}
    assert (requested_as[T3], requested_as[T6], requested_as[T7]) == (
        "compaction",
        "clustering",
        "clustering",
    )


def test_cli_files_agree_with_the_oracle(table: Layout2Table) -> None:
    shown = cli_json("files", table.base)["file_slices"]
    ours = sorted(
        (
            {k: s[k] for k in ("partition", "file_id", "base_instant", "base_file", "log_files")}
            for s in shown
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )
    assert ours == oracle.file_slices(table.base)


def test_services_refuse_layout2_tables_only_with_a_metadata_table(table: Layout2Table) -> None:
    hudi = HudiTable.open(table.base)
    assert not [r for r in unsupported_features(hudi) if "table version" in r]
    properties = Path(table.base, ".hoodie", "hoodie.properties")
    properties.write_text(properties.read_text() + "hoodie.table.metadata.partitions=files\n")
    with pytest.raises(UnsupportedTableError, match="metadata table"):
        ensure_supported(HudiTable.open(table.base))


# Slicing by completion time, one rule per test. Times: requested Rn, completed Dn.
R1, D1 = "20240401100000000", "20240401100001000"
R2, D2 = "20240401100100000", "20240401100101000"
R3, D3 = "20240401100200000", "20240401100201000"
R4, D4 = "20240401100300000", "20240401100301000"


def delta_commit(table: Layout2Table, ts: str, done: str | None, stats: list[WriteStat]) -> None:
    """A delta commit's instant files: completed at `done`, or left inflight when None."""
    table.instant(f"{ts}.deltacommit.requested")
    table.instant(f"{ts}.deltacommit.inflight")
    if done is not None:
        table.instant(f"{ts}_{done}.deltacommit", metadata("UPSERT", stats).to_avro_bytes())


def request_compaction(table: Layout2Table, ts: str, base_instant: str, logs: list[str]) -> None:
    plan = {
        "operations": [
            {
                "baseInstantTime": base_instant,
                "fileId": FILE_A,
                "partitionPath": "p1",
                "dataFilePath": str(BaseFileName(FILE_A, "0-1-0", base_instant)),
                "deltaFilePaths": [str(LogFileName(FILE_A, log, 1, "0-1-0")) for log in logs],
            }
        ],
        "version": 2,
    }
    table.instant(f"{ts}.compaction.requested", avro_codec.encode("HoodieCompactionPlan", plan))


def slices_of(base: str, file_id: str) -> list[tuple[str, str | None, list[str]]]:
    """(base instant, base file instant, delta commits of the log files) of each slice."""
    view = HudiTable.open(base).file_system_view()
    group = next(g for g in view.file_groups if g.file_id == file_id)
    return [
        (
            s.base_instant_time,
            s.base_file.name.instant_time if s.base_file else None,
            [log.name.base_instant_time for log in s.log_files],
        )
        for s in group.slices
    ]


def merged_rows(base: str) -> list[dict[str, Any]]:
    view = HudiTable.open(base).file_system_view()
    return sorted(
        (
            {
                "partition": s.partition_path,
                "file_id": s.file_id,
                "base_instant": s.base_instant_time,
                "base_file": s.base_file.file_name if s.base_file else "",
                "log_files": [log.file_name for log in s.log_files],
            }
            for s in view.latest_merged_file_slices()
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )


def test_log_files_of_a_group_without_base_file_share_the_slice_the_first_one_starts(
    tmp_path: Path,
) -> None:
    """Writers that insert into log files (bucket index, Flink) leave groups with no base
    file: the first delta commit starts the slice and later ones append to it."""
    table = new_table(str(tmp_path / "t"), 9)
    delta_commit(table, R1, D1, [table.log_file("p1", FILE_A, R1, [("a1", 1)])])
    delta_commit(table, R2, D2, [table.log_file("p1", FILE_A, R2, [("a1", 2), ("a2", 2)])])

    assert slices_of(table.base, FILE_A) == [(R1, None, [R1, R2])]
    assert merged_rows(table.base) == oracle.file_slices(table.base)
    got = {key: row["ts"] for key, row in oracle.rows_by_key(table.base).items()}
    assert got == {"a1": 2, "a2": 2}


def test_pending_compaction_takes_the_logs_of_delta_commits_completed_after_it_was_requested(
    tmp_path: Path,
) -> None:
    """R2 completes before the compaction R3 is requested: its log stays in the slice being
    compacted. RA is requested before R3 but completes after it: its log goes to the
    compaction's new slice, as in Hudi 1.x. A snapshot read merges both slices."""
    ra, da = "20240401100150000", "20240401100250000"  # R2 < RA < R3 < DA
    table = new_table(str(tmp_path / "t"), 9)
    delta_commit(table, R1, D1, [table.base_file("p1", FILE_A, R1, [("a1", 1), ("a2", 1)])])
    delta_commit(table, R2, D2, [table.log_file("p1", FILE_A, R2, [("a1", 2)])])
    late = table.log_file("p1", FILE_A, ra, [("a2", 4)])
    delta_commit(table, ra, None, [])
    request_compaction(table, R3, R1, [R2])
    table.instant(f"{ra}_{da}.deltacommit", metadata("UPSERT", [late]).to_avro_bytes())

    assert slices_of(table.base, FILE_A) == [(R1, R1, [R2]), (R3, None, [ra])]
    # hudi-rs does not split at pending compactions: its slice is our merged one
    assert merged_rows(table.base) == oracle.file_slices(table.base)
    got = {key: row["ts"] for key, row in oracle.rows_by_key(table.base).items()}
    assert got == {"a1": 2, "a2": 4}


def test_a_log_completed_after_a_compaction_was_requested_but_before_it_completed(
    tmp_path: Path,
) -> None:
    """The compaction R3 completes after RA's delta commit did; RA's log still belongs to R3's
    slice (it completed after R3 was requested), not to the compacted one, so the compacted
    base file plus that log is the latest slice."""
    ra, da = "20240401100150000", "20240401100250000"  # R2 < RA < R3 < DA < D3x
    d3 = "20240401100260000"
    table = new_table(str(tmp_path / "t"), 8)
    delta_commit(table, R1, D1, [table.base_file("p1", FILE_A, R1, [("a1", 1), ("a2", 1)])])
    delta_commit(table, R2, D2, [table.log_file("p1", FILE_A, R2, [("a1", 2)])])
    late = table.log_file("p1", FILE_A, ra, [("a2", 4)])
    delta_commit(table, ra, None, [])
    request_compaction(table, R3, R1, [R2])
    table.instant(f"{R3}.compaction.inflight")
    table.instant(f"{ra}_{da}.deltacommit", metadata("UPSERT", [late]).to_avro_bytes())
    compacted = table.base_file("p1", FILE_A, R3, [("a1", 2), ("a2", 1)])
    compaction = metadata("COMPACT", [compacted], compacted=True)
    table.instant(f"{R3}_{d3}.commit", compaction.to_avro_bytes())

    assert slices_of(table.base, FILE_A) == [(R1, R1, [R2]), (R3, R3, [ra])]
    assert merged_rows(table.base) == oracle.file_slices(table.base)
    got = {key: row["ts"] for key, row in oracle.rows_by_key(table.base).items()}
    assert got == {"a1": 2, "a2": 4}


def test_times_of_another_width_than_the_slices_compare_by_requested_time(
    tmp_path: Path,
) -> None:
    """Hudi 1.x compares a completion time with base instants only when both have the same
    width (`CompletionTimeQueryView.getCompletionTime`); otherwise it compares the delta
    commit's requested time. Here the base files carry second-precision times."""
    r1, r3 = "20240401100000", "20240401100200"  # base file and pending compaction
    ra, da = "20240401100150000", "20240401100250000"  # requested before r3, completed after
    table = new_table(str(tmp_path / "t"), 9)
    delta_commit(table, r1, None, [table.base_file("p1", FILE_A, r1, [("a1", 1)])])
    table.instant(f"{r1}_20240401100001.deltacommit", metadata("INSERT", []).to_avro_bytes())
    late = table.log_file("p1", FILE_A, ra, [("a1", 2)])
    delta_commit(table, ra, None, [])
    request_compaction(table, r3, r1, [])
    table.instant(f"{ra}_{da}.deltacommit", metadata("UPSERT", [late]).to_avro_bytes())

    # by completion time the log would be in r3's slice; by requested time it is in r1's
    assert slices_of(table.base, FILE_A) == [(r1, r1, [ra]), (r3, None, [])]
