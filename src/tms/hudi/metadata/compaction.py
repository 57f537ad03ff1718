"""Compaction of the metadata table by itself, as Hudi 1.x's metadata writer does it
(`HoodieBackedTableMetadataWriter.compactIfNecessary`), so a table never needs its writer to.

Scheduling refuses while a compaction or log compaction of the metadata table is pending (run
that one first, as `runPendingTableServicesOperations` does). The instant is the earliest data
table instant that is pending but already completed on the metadata table, minus 1 ms (so that
instant can still be rolled back), else a new instant time; when the metadata table already
completed that instant, nothing is scheduled. The plan (`HoodieCompactionPlan` version 2,
`<ts>.compaction.requested` on the metadata table's timeline) takes every file group's latest
slice with the log files whose delta commit completed before the compaction instant
(`BaseHoodieCompactionPlanGenerator`); slices without such log files are left alone.

Table version 6 (timeline layout 1) follows Hudi 0.14/0.15 instead: the instant is the latest
completed delta commit followed by `001`, the plan takes each latest slice whole (its log files
are named by its base instant), and it is planned only while no data table instant and no
metadata delta commit is pending (see `_writers_active`).

Executing merges each slice as the metadata reader does (rollback blocks, delete blocks,
`records.combine`, only blocks of valid instants before the compaction), key by key through
`slice_merge` (a block of each file held, never the slice), into one HFile base file
`<fileId>_<writeToken>_<instant>.hfile`, written block by block: cells sorted by key, the record's
`key` field emptied, file info `schema` and `minRecordKey`/`maxRecordKey` (Hudi also writes a
`DYNAMIC_V0` bloom filter meta block; we do not, no metadata reader uses it). Deleted keys are
dropped. A marker precedes each file; the instant completes as a `commit` marked compacted,
with one write stat per file. An execution that finds the compaction inflight (a crash) rolls
it back first: a rollback instant deletes the files its markers name, and the plan runs again.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import NULL_COMMIT, RuntimeStats, WriteStat
from tms.hudi.errors import PlanCompletedError, PlanNotFoundError, UnsupportedTableError
from tms.hudi.files.compaction_operation import CompactionOperation
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.files.marked_files import delete_unreported_files, sort_marked_files
from tms.hudi.files.markers import (
    Marker,
    MarkerType,
    create_marker,
    delete_markers,
    list_markers,
)
from tms.hudi.files.names import BaseFileName
from tms.hudi.memory import DEFAULT_RECORDS, task_workdir
from tms.hudi.metadata.partitions import MetadataPartition, file_group_index
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.schema import (
    FIRST_1X_TABLE_VERSION,
    layout_mismatch,
    writer_schema,
)
from tms.hudi.metadata.slice_merge import MergedKey, merge_slice_by_key
from tms.hudi.metadata.valid_instants import BOOTSTRAP_PREFIX
from tms.hudi.metadata.writer import (
    hfile_content,
    hfile_writer,
    record_schema_without_meta_fields,
)
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import (
    delete_pending,
    new_instant_time,
    request,
    revert_to_requested,
    transition,
)

__all__ = [
    "MetadataCompactionResult",
    "base_hfile_content",
    "compaction_instant_time",
    "execute_metadata_compaction",
    "pending_metadata_compactions",
    "schedule_metadata_compaction",
]

PLAN_VERSION = 2
COMPACT_OPERATION = "COMPACT"
HFILE_EXTENSION = "hfile"
MIN_RECORD_KEY = b"minRecordKey"
MAX_RECORD_KEY = b"maxRecordKey"
_TIME_FORMAT = "%Y%m%d%H%M%S"


def _operation_from_avro(record: Mapping[str, Any]) -> CompactionOperation:
    """A plan operation of the metadata table; a partition Hudi does not know is refused."""
    partition = str(record.get("partitionPath") or "")
    MetadataPartition(partition).kind  # noqa: B018 - refuses a partition Hudi does not know
    names = [posixpath.basename(str(p)) for p in record.get("deltaFilePaths") or []]
    data = record.get("dataFilePath")
    return CompactionOperation(
        partition,
        str(record["fileId"]),
        str(record["baseInstantTime"]),
        posixpath.basename(str(data)) if data else None,
        tuple(names),
        dict(record.get("metrics") or {}),
    )


# Scheduling -----------------------------------------------------------------------------------


def minus_millis(instant_time: str, millis: int) -> str:
    """`HoodieInstantTimeGenerator.instantTimeMinusMillis` for `yyyyMMddHHmmssSSS`."""
    moment = datetime.strptime(instant_time[:14], _TIME_FORMAT)
    moment += timedelta(milliseconds=int(instant_time[14:17] or 0) - millis)
    return moment.strftime(_TIME_FORMAT) + f"{moment.microsecond // 1000:03d}"


COMPACTION_SUFFIX = "001"
"""Hudi 0.x's `createCompactionTimestamp` suffix (table version 6)."""


def compaction_instant_time(reader: MetadataTableReader) -> str:
    """The earliest data table instant pending there but completed on the metadata table,
    minus 1 ms (so it stays rollback-able after the compaction); else a new instant time.

    On table version 6: the latest completed delta commit followed by `001`, as Hudi 0.x
    names it, so every later delta commit sorts after the compaction."""
    if reader.data_config.table_version < FIRST_1X_TABLE_VERSION:
        delta_commits = reader.timeline.completed((Action.DELTA_COMMIT,))
        latest = max((i.requested_time for i in delta_commits), default=BOOTSTRAP_PREFIX)
        return latest + COMPACTION_SUFFIX
    completed = {i.requested_time for i in reader.timeline.completed()}
    for instant in reader.data_timeline.instants:
        if instant.is_pending and instant.requested_time in completed:
            return minus_millis(instant.requested_time, 1)
    return new_instant_time(reader.timeline.instants + reader.data_timeline.instants)


def _scheduling_refusals(reader: MetadataTableReader) -> list[str]:
    reasons: list[str] = []
    mismatch = layout_mismatch(
        reader.data_config.table_version, reader.config.timeline_layout_version
    )
    if mismatch:
        reasons.append(mismatch)
    busy = reader.timeline.pending((Action.COMPACTION, Action.LOG_COMPACTION))
    if busy:
        reasons.append(f"a metadata compaction is pending: {busy[0].requested_time}")
    return reasons


def _completed_before(reader: MetadataTableReader, instant_time: str) -> Callable[[str], bool]:
    completion = {i.requested_time: i.completion_time for i in reader.timeline.completed()}

    def done(delta_commit: str) -> bool:
        finished = completion.get(delta_commit)
        return finished is not None and finished < instant_time

    return done


def _any_log(_: str) -> bool:
    return True


def _writers_active(reader: MetadataTableReader) -> bool:
    """Table version 6: whether a data table instant or a metadata delta commit is pending.

    Layout 1 names a log file by its slice's base instant, so a writer that looked at the
    metadata table before the plan existed appends to the slice being compacted, and its
    blocks (later than the compaction) would be lost with that slice. Hudi 0.x runs this
    compaction inside the writer, under the table lock; outside the writer it is planned only
    while no writer is active, and the plan is withdrawn when one started meanwhile."""
    data = Timeline.load(reader.data_storage, reader.data_config)
    metadata = Timeline.load(reader.storage, reader.config)
    return bool(
        [i for i in data.instants if i.is_pending] or metadata.pending((Action.DELTA_COMMIT,))
    )


def _operations(reader: MetadataTableReader, instant_time: str) -> list[CompactionOperation]:
    view = FileSystemView.build(reader.storage, reader.timeline, partitions=reader.partitions)
    done = _completed_before(reader, instant_time)
    if reader.data_config.table_version < FIRST_1X_TABLE_VERSION:
        done = _any_log  # layout 1: the whole latest slice (no writer is active)
    operations: list[CompactionOperation] = []
    for partition in reader.partitions:
        owner = MetadataPartition(partition)
        slices = [s for s in view.latest_file_slices(partition) if owner.owns(s.file_id)]
        for file_slice in sorted(slices, key=lambda s: file_group_index(s.file_id)):
            logs = [log for log in file_slice.log_files if done(log.name.base_instant_time)]
            if not logs:
                continue
            log_size = sum(log.size for log in logs)
            operations.append(
                CompactionOperation(
                    partition,
                    file_slice.file_id,
                    file_slice.base_instant_time,
                    file_slice.base_file.file_name if file_slice.base_file else None,
                    tuple(log.file_name for log in logs),
                    {
                        "TOTAL_LOG_FILES": float(len(logs)),
                        "TOTAL_LOG_FILES_SIZE": float(log_size),
                    },
                )
            )
    return operations


def schedule_metadata_compaction(
    data_storage: Storage, *, reader: MetadataTableReader | None = None
) -> str | None:
    """Write a compaction plan on the metadata table; its instant, or None when no file group
    has log files to compact or that instant already completed there."""
    reader = reader or MetadataTableReader.open(data_storage)
    reasons = _scheduling_refusals(reader)
    if reasons:
        raise UnsupportedTableError("cannot compact the metadata table: " + "; ".join(reasons))
    instant_time = compaction_instant_time(reader)
    if reader.timeline.get(instant_time) is not None:
        return None
    version_6 = reader.data_config.table_version < FIRST_1X_TABLE_VERSION
    if version_6 and _writers_active(reader):
        return None
    operations = _operations(reader, instant_time)
    if not operations:
        return None
    plan = {
        "operations": [op.to_avro() for op in operations],
        "extraMetadata": {},
        "version": PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": [],
    }
    content = avro_codec.encode("HoodieCompactionPlan", plan)
    requested = request(reader.storage, reader.config, instant_time, Action.COMPACTION, content)
    if version_6 and _writers_active(reader):
        delete_pending(reader.storage, reader.config, requested)
        return None
    return instant_time


def pending_metadata_compactions(data_storage: Storage) -> list[str]:
    """Requested times of the metadata table's pending compactions, oldest first."""
    reader = MetadataTableReader.open(data_storage)
    return [i.requested_time for i in reader.timeline.pending_compactions()]


# Execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionTask:
    """What one file group's compaction needs; small and picklable."""

    metadata_path: str
    instant_time: str
    schema: str
    valid: frozenset[str]
    operation: CompactionOperation
    memory_budget: int = DEFAULT_RECORDS
    """Bytes the task may hold of a delete block's keys while it sorts them (the rest of the
    merge holds a block of each file)."""


class TaskRunner(Protocol):
    """Runs `compact_file_group` once per task with its write token (Spark, or a loop)."""

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[WriteStat]: ...


def run_locally(tasks: Sequence[CompactionTask]) -> list[WriteStat]:
    """Every task in this process, one after another (write tokens `<n>-0-0`)."""
    return [compact_file_group(task, f"{n}-0-0") for n, task in enumerate(tasks)]


def base_hfile_content(schema: str, records: list[tuple[str, bytes]]) -> bytes:
    """A base HFile of encoded records (sorted by key), with the file info Hudi writes."""
    bounds = {
        MIN_RECORD_KEY: (records[0][0] if records else "").encode("utf-8"),
        MAX_RECORD_KEY: (records[-1][0] if records else "").encode("utf-8"),
    }
    cells = ((key.encode("utf-8"), value) for key, value in records)
    return hfile_content(schema, cells, bounds)


@dataclass
class _Figures:
    """What a file group's merge counted, key by key, for its write stat."""

    writes: int = 0
    deletes: int = 0
    updates: int = 0
    inserts: int = 0
    log_records: int = 0
    first_key: bytes | None = None
    last_key: bytes = b""

    def cells(self, merged: Iterable[MergedKey], schema: str) -> Iterator[tuple[bytes, bytes]]:
        """The live records as cells, counted as they pass."""
        for one in merged:
            self.log_records += one.in_log
            if one.value is None:
                self.deletes += one.in_base
                continue
            self.writes += 1
            self.updates += one.in_log and one.in_base
            self.inserts += not one.in_base
            key = one.key.encode("utf-8")
            if self.first_key is None:
                self.first_key = key
            self.last_key = key
            yield key, one.cell(schema)


def compact_file_group(task: CompactionTask, write_token: str) -> WriteStat:
    """Merge one slice into a new base HFile, key by key: the base file and log blocks are
    read a block at a time and the HFile is written block by block to local disk, then moved
    into place (`slice_merge`), so the task holds no slice whatever its size. Returns the new
    file's write stat."""
    started = time.perf_counter()
    storage = Storage(task.metadata_path)
    operation = task.operation
    file_slice = operation.file_slice()
    cut = task.instant_time
    name = str(BaseFileName(operation.file_id, write_token, cut, HFILE_EXTENSION))
    has_base = file_slice.base_file is not None
    marker = Marker(
        operation.partition_path, name, MarkerType.MERGE if has_base else MarkerType.CREATE
    )
    create_marker(storage, cut, marker)
    figures = _Figures()
    with task_workdir() as workdir:
        merged = merge_slice_by_key(
            storage,
            file_slice,
            lambda t: t in task.valid and t < cut,
            workdir=workdir,
            budget=task.memory_budget,
        )
        local = os.path.join(workdir, name)
        with hfile_writer(task.schema, local) as writer:
            writer.append_cells(figures.cells(merged, task.schema))
            writer.add_file_info(MIN_RECORD_KEY, figures.first_key or b"")
            writer.add_file_info(MAX_RECORD_KEY, figures.last_key)
        size = os.path.getsize(local)
        storage.move_in(local, marker.data_file_path)
    write_ms = int((time.perf_counter() - started) * 1000)
    return WriteStat(
        file_id=operation.file_id,
        path=marker.data_file_path,
        prev_commit=operation.base_instant_time if has_base else NULL_COMMIT,
        num_writes=figures.writes,
        num_deletes=figures.deletes,
        num_update_writes=figures.updates,
        num_inserts=figures.inserts,
        total_write_bytes=size,
        partition_path=operation.partition_path,
        total_log_records=figures.log_records,
        total_log_files_compacted=len(operation.delta_file_names),
        total_log_size_compacted=int(operation.metrics.get("TOTAL_LOG_FILES_SIZE", 0)),
        total_updated_records_compacted=figures.log_records,
        file_size_in_bytes=size,
        runtime_stats=RuntimeStats(
            total_scan_time=0,
            total_upsert_time=write_ms if has_base else 0,
            total_create_time=0 if has_base else write_ms,
        ),
    )


@dataclass
class MetadataCompactionResult:
    instant_time: str
    file_groups: int = 0
    files_written: int = 0
    bytes_written: int = 0
    records_written: int = 0
    log_files_compacted: int = 0
    rolled_back: list[str] = field(default_factory=list)


def _pending_plan(reader: MetadataTableReader, instant_time: str) -> Instant:
    instant = reader.timeline.get(instant_time)
    if instant is None or not reader.timeline.is_compaction(instant):
        raise PlanNotFoundError(f"the metadata table has no compaction plan at {instant_time}")
    if instant.is_completed:
        raise PlanCompletedError(f"metadata compaction {instant_time} has already completed")
    return instant


def rollback_inflight_compaction(reader: MetadataTableReader, instant: Instant) -> str:
    """Undo a crashed attempt: a rollback instant deletes the files its markers name, and the
    plan goes back to requested. Returns the rollback instant."""
    storage, config = reader.storage, reader.config
    files: dict[str, list[str]] = {}
    ts = instant.requested_time
    for marker in sort_marked_files(storage, ts, list_markers(storage, ts)).owned:
        files.setdefault(marker.partition_path, []).append(marker.data_file_path)
    rollback = RollbackInstant(
        storage,
        config,
        new_instant_time(reader.timeline.instants + reader.data_timeline.instants),
        (instant.requested_time, Action.COMPACTION),
        {p: sorted(paths) for p, paths in sorted(files.items())},
    )
    rollback.start()
    rollback.delete_files()
    revert_to_requested(storage, config, instant)
    rollback.complete()
    delete_markers(storage, instant.requested_time)
    return rollback.rollback_time


def execute_metadata_compaction(
    data_storage: Storage,
    instant_time: str,
    *,
    run: TaskRunner = run_locally,
    reader: MetadataTableReader | None = None,
    memory_budget: int = DEFAULT_RECORDS,
) -> MetadataCompactionResult:
    """Run the metadata table's pending compaction at `instant_time` and complete it; each
    task holds at most `memory_budget` bytes of a delete block's keys."""
    reader = reader or MetadataTableReader.open(data_storage)
    instant = _pending_plan(reader, instant_time)
    result = MetadataCompactionResult(instant_time)
    if instant.state is State.INFLIGHT:
        result.rolled_back.append(rollback_inflight_compaction(reader, instant))
        instant = Instant(instant_time, instant.action, State.REQUESTED)
    plan = reader.timeline.compaction_plan(instant)
    operations = [_operation_from_avro(op) for op in plan.get("operations") or []]
    schema = writer_schema(reader.data_config.table_version, reader.written_schema)
    storage, config = reader.storage, reader.config
    inflight = transition(storage, config, instant, State.INFLIGHT)
    valid = frozenset(reader.valid_instants)
    tasks = [
        CompactionTask(storage.base_path, instant_time, schema, valid, op, memory_budget)
        for op in operations
    ]
    stats = run(tasks)
    delete_unreported_files(storage, instant_time, {s.path for s in stats if s.path})
    metadata = CommitMetadata(
        compacted=True,
        operation_type=COMPACT_OPERATION,
        extra_metadata={"schema": record_schema_without_meta_fields(schema)},
    )
    for stat in stats:
        metadata.add_write_stat(stat.partition_path or "", stat)
    transition(storage, config, inflight, State.COMPLETED, metadata)
    delete_markers(storage, instant_time)
    result.file_groups = len(operations)
    result.files_written = len(stats)
    result.bytes_written = sum(s.total_write_bytes for s in stats)
    result.records_written = sum(s.num_writes for s in stats)
    result.log_files_compacted = sum(s.total_log_files_compacted for s in stats)
    return result
