"""A small Hudi writer: insert, upsert and delete batches, each one commit on the timeline.

It writes what Hudi's Spark writer writes for table versions 6 to 9: meta columns,
requested/inflight/completed instants with commit metadata (JSON in timeline layout 1, Avro
and completion times in the file names in layout 2), partition metadata, markers while
writing and a heartbeat while the instant is in flight. This module holds the instant and
routes each batch's rows to file groups (existing ones by record key, new ones for the rest);
the files themselves are written by `tms.testing.sample_writer.handles`, and new tables are
created by `tms.testing.sample_writer.new_table`. Copy-on-write tables rewrite the base files
they touch; merge-on-read tables append updates and deletes to log files. A table with a
metadata table gets, before each instant completes, the metadata delta commit of the same
instant (`tms.testing.sample_writer.metadata_update`). It runs in one process and is meant
for tests, demos, benchmarks and small tables.
"""

from __future__ import annotations

import contextlib
import json
import time

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.data import write_partition_metadata
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import delete_markers
from tms.hudi.files.merge import latest_by_key
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    PARTITION_PATH,
    RECORD_KEY,
)
from tms.hudi.metadata.writer import write_delta_commit
from tms.hudi.properties import TableConfig
from tms.hudi.record_keys import virtual_key_generation
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import delete_pending, new_instant_time, request, transition
from tms.testing.sample_writer import keys
from tms.testing.sample_writer.handles import (
    WriteOperation,
    append_log_file,
    create_file_groups,
    merge_base_file,
    read_keys,
)
from tms.testing.sample_writer.log_blocks import LogBlockFormat
from tms.testing.sample_writer.metadata_update import WriterMetadata

__all__ = ["HudiWriter"]

DEFAULT_MAX_FILE_ROWS = 250_000
WRITER_TABLE_VERSIONS = (6, 7, 8, 9)


class HudiWriter:
    """Applies batches to one table; each batch is one commit (or delta commit)."""

    def __init__(
        self,
        table: HudiTable,
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
        log_block_format: LogBlockFormat = LogBlockFormat.AVRO,
        *,
        locked: bool = False,
    ) -> None:
        self.table = table
        self.max_file_rows = max_file_rows
        self.heartbeat_interval = heartbeat_interval
        self.log_block_format = log_block_format
        """Data blocks of merge-on-read log files: Avro records or a Parquet file."""
        self.locked = locked
        """Take the table's lock (`HudiTable.lock`) from reading the timeline until the new
        instant is requested, as a writer next to other writers and table services must: a
        plan scheduled meanwhile would not see the write, nor the write the plan. Such a
        writer also waits for clusterings that are not cancellable (`plan_wait_seconds`)."""
        self.plan_wait_seconds = 600.0

    @classmethod
    def open(cls, base_path: str, max_file_rows: int = DEFAULT_MAX_FILE_ROWS) -> HudiWriter:
        return cls(HudiTable.open(base_path), max_file_rows)

    @property
    def storage(self) -> Storage:
        return self.table.storage

    @property
    def config(self) -> TableConfig:
        return self.table.config

    def insert(self, batch: pa.Table) -> str:
        """Write new records to new file groups, without looking up existing keys."""
        return self._write(batch, WriteOperation.INSERT)

    def upsert(self, batch: pa.Table) -> str:
        """Update records whose key exists (latest by ordering field), insert the others."""
        return self._write(batch, WriteOperation.UPSERT)

    def delete(self, batch: pa.Table) -> str:
        """Delete the records whose keys the batch holds (other columns may be absent)."""
        return self._write(batch, WriteOperation.DELETE)

    # The write ---------------------------------------------------------------------------

    def _write(self, batch: pa.Table, operation: WriteOperation) -> str:
        if self.config.table_version not in WRITER_TABLE_VERSIONS:
            raise ValueError(
                f"the writer writes table versions 6 to 9; this table is version "
                f"{self.config.table_version}"
            )
        deadline = time.monotonic() + self.plan_wait_seconds
        while True:
            lock = self.table.lock.file_lock(self.storage) if self.locked else None
            with lock or contextlib.nullcontext():
                timeline = self.table.timeline()
                blocking = self._blocking_plans(timeline)
                if not blocking:
                    WriterMetadata.of(self.table, timeline)  # refusals before any write
                    instant_time = new_instant_time(timeline.instants)
                    tagged = self._prepare(batch, instant_time, operation)
                    # The schema the commit records; a delete records the table's, as Hudi does.
                    schema_json = (
                        timeline.latest_schema()
                        if operation is WriteOperation.DELETE
                        else json.dumps(avro_record_schema(self.config.table_name, tagged.schema))
                    )
                    action = Action.DELTA_COMMIT if self.config.is_merge_on_read else Action.COMMIT
                    requested = request(self.storage, self.config, instant_time, action)
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"clustering {', '.join(blocking)} did not complete within "
                    f"{self.plan_wait_seconds:g}s; the write waits for plans it must not overtake"
                )
            time.sleep(0.2)
        kept = self._metadata_kept(requested)
        with heartbeat.Heartbeat(self.storage, instant_time, self.heartbeat_interval):
            inflight = transition(
                self.storage,
                self.config,
                requested,
                State.INFLIGHT,
                CommitMetadata(operation_type=operation.value),
            )
            writes, deleted = self._write_files(
                tagged, instant_time, operation, timeline, schema_json
            )
            metadata = CommitMetadata(
                extra_metadata={"schema": schema_json} if schema_json else {},
                operation_type=operation.value,
            )
            for stat in writes:
                metadata.add_write_stat(stat.partition_path or "", stat)
            if kept is not None:
                inserted = {
                    (stat.partition_path or "", stat.file_id or ""): read_keys(
                        self.table, stat.path or ""
                    )
                    .column(RECORD_KEY)
                    .to_pylist()
                    for stat in writes
                    if stat.prev_commit == "null"
                }
                update = kept.update(self.table, instant_time, metadata, inserted, deleted)
                write_delta_commit(self.storage, instant_time, update)
            transition(self.storage, self.config, inflight, State.COMPLETED, metadata)
            delete_markers(self.storage, instant_time)
        return instant_time

    def _blocking_plans(self, timeline: Timeline) -> list[str]:
        """Pending clusterings that are not cancellable, which a writer next to table
        services (`locked`) waits for, as Hudi's writers do not update file groups under
        clustering; a cancellable one it overtakes (RFC-79): the clustering finds the
        conflict and cancels itself."""
        if not self.locked:
            return []
        return [
            i.requested_time
            for i in timeline.pending_clusterings()
            if not cancel_requests.is_cancellable(timeline, i)
        ]

    def _metadata_kept(self, requested: Instant) -> WriterMetadata | None:
        """The metadata partitions to update, from the table config as it is once the instant
        is requested: an index build that lists partitions inflight after this waits for the
        instant; one that listed them before gets this commit's log blocks."""
        current = HudiTable(self.storage, TableConfig.load(self.storage))
        try:
            return WriterMetadata.of(current, current.timeline())
        except Exception:
            delete_pending(self.storage, self.config, requested)
            raise

    def _prepare(self, batch: pa.Table, instant_time: str, operation: WriteOperation) -> pa.Table:
        """Meta columns prepended; duplicates within the batch reduced to the latest."""
        config = self.config
        virtual = virtual_key_generation(config)
        if virtual is not None:
            # keys are never stored: they must be what Hudi's key generator computes
            record_keys = virtual.record_keys(batch)
            partitions = virtual.partition_paths(batch)
        else:
            record_keys = keys.record_keys(batch, config.record_key_fields)
            partitions = keys.partition_paths(
                batch, config.partition_fields, config.hive_style_partitioning
            )
        data = batch.drop_columns([c for c in META_FIELDS if c in batch.column_names])
        n = data.num_rows
        meta = {
            COMMIT_TIME: pa.array([instant_time] * n, pa.string()),
            COMMIT_SEQNO: pa.array([""] * n, pa.string()),
            RECORD_KEY: record_keys,
            PARTITION_PATH: partitions,
            FILE_NAME: pa.array([""] * n, pa.string()),
        }
        # The batch's own fields (nullability, metadata such as an enum's Avro type) are kept.
        tagged = pa.Table.from_arrays(
            [*meta.values(), *data.columns],
            schema=pa.schema(
                [pa.field(name, array.type) for name, array in meta.items()] + list(data.schema)
            ),
        )
        if operation is WriteOperation.DELETE:
            return tagged
        ordering = record_merging(config).compared_fields
        missing = [name for name in ordering if name not in tagged.column_names]
        if missing:
            raise ValueError(f"ordering field {missing[0]!r} is missing from the batch")
        return latest_by_key(tagged, ordering)

    def _write_files(
        self,
        tagged: pa.Table,
        instant_time: str,
        operation: WriteOperation,
        timeline: Timeline,
        schema_json: str | None,
    ) -> tuple[list[WriteStat], list[str]]:
        """The write stats of the files written, and the keys deleted."""
        view = self.table.file_system_view(timeline)
        slices = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
        merged = {(s.partition_path, s.file_id): s for s in view.latest_merged_file_slices()}
        writes: list[WriteStat] = []
        located, new = self._locate(tagged, merged, operation)
        for partition in sorted(set(pc.unique(tagged.column(PARTITION_PATH)).to_pylist())):
            write_partition_metadata(self.storage, partition, instant_time)
        for (partition, file_id), rows in located.items():
            target = slices[(partition, file_id)]
            if self.config.is_merge_on_read:
                writes.append(
                    append_log_file(
                        self.table,
                        target,
                        rows,
                        instant_time,
                        operation,
                        schema_json,
                        self.log_block_format,
                    )
                )
            else:
                writes.append(
                    merge_base_file(
                        self.table, merged[(partition, file_id)], rows, instant_time, operation
                    )
                )
        if operation is not WriteOperation.DELETE and new.num_rows:
            writes += create_file_groups(self.table, new, instant_time, self.max_file_rows)
        deleted = (
            [key for rows in located.values() for key in rows.column(RECORD_KEY).to_pylist()]
            if operation is WriteOperation.DELETE
            else []
        )
        return writes, deleted

    def _locate(
        self,
        tagged: pa.Table,
        merged: dict[tuple[str, str], FileSlice],
        operation: WriteOperation,
    ) -> tuple[dict[tuple[str, str], pa.Table], pa.Table]:
        """Split a batch into rows of existing file groups and rows for new ones."""
        if operation is WriteOperation.INSERT or not merged:
            return {}, tagged
        partitions = set(pc.unique(tagged.column(PARTITION_PATH)).to_pylist())
        index_parts = []
        for (partition, file_id), file_slice in merged.items():
            if partition not in partitions or file_slice.base_file is None:
                continue
            existing = read_keys(self.table, file_slice.base_file.path)
            index_parts.append(
                pa.table(
                    {
                        RECORD_KEY: existing.column(RECORD_KEY),
                        "__partition": pa.array([partition] * existing.num_rows, pa.string()),
                        "__file_id": pa.array([file_id] * existing.num_rows, pa.string()),
                    }
                )
            )
        if not index_parts:
            return {}, tagged
        index = pa.concat_tables(index_parts)
        numbered = tagged.append_column("__row", pa.array(range(tagged.num_rows), pa.int64()))
        joined = numbered.select([RECORD_KEY, PARTITION_PATH, "__row"]).join(
            index,
            keys=[RECORD_KEY, PARTITION_PATH],
            right_keys=[RECORD_KEY, "__partition"],
            join_type="inner",
        )
        located: dict[tuple[str, str], pa.Table] = {}
        for file_id in pc.unique(joined.column("__file_id")).to_pylist():
            rows = joined.filter(pc.equal(joined.column("__file_id"), file_id))
            row_ids = pc.sort_indices(rows.column("__row"))
            taken = tagged.take(pc.take(rows.column("__row"), row_ids))
            partition = taken.column(PARTITION_PATH)[0].as_py()
            located[(partition, file_id)] = taken
        found = pc.is_in(numbered.column("__row"), value_set=joined.column("__row"))
        return located, tagged.filter(pc.invert(found))
