"""A small Hudi writer: create tables and apply insert, upsert and delete batches.

It writes what Hudi's Spark writer writes for table version 6 (timeline layout 1): meta
columns, Hudi's file names, requested/inflight/completed instants with JSON commit metadata,
partition metadata, markers while writing and a heartbeat while the instant is in flight.
Copy-on-write tables rewrite the base files they touch; merge-on-read tables append updates
and deletes to log files. It runs in one process and is meant for tests, demos, benchmarks
and small tables.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi import heartbeat, keys
from tms.hudi.avro_schema import avro_record_schema
from tms.hudi.commit_metadata import CommitMetadata
from tms.hudi.data_files import (
    META_COLUMNS,
    read_base_file,
    write_base_file,
    write_log_file,
    write_partition_metadata,
)
from tms.hudi.filenames import BaseFileName, LogFileName, new_file_id
from tms.hudi.fs_view import FileSlice
from tms.hudi.instant import Action, State
from tms.hudi.log_block import DeleteRecord
from tms.hudi.markers import Marker, MarkerType, create_marker, delete_markers
from tms.hudi.merge import DeleteVersion, latest_by_key, merge_versions
from tms.hudi.properties import (
    ARCHIVELOG_FOLDER,
    BASE_FILE_FORMAT,
    COPY_ON_WRITE,
    CREATE_SCHEMA,
    HIVE_STYLE_PARTITIONING,
    KEY_GENERATOR_CLASS,
    MERGE_ON_READ,
    PARTITION_FIELDS,
    POPULATE_META_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELDS,
    TABLE_NAME,
    TABLE_TYPE,
    TABLE_VERSION,
    TIMELINE_LAYOUT_VERSION,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable, TableNotFoundError
from tms.hudi.timeline import Timeline
from tms.hudi.transitions import new_instant_time, request, transition
from tms.hudi.write_stat import WriteStat

WRITER_TOKEN = "0-1-0"
DEFAULT_MAX_FILE_ROWS = 250_000
DEFAULT_PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
"""Event-time ordering: the highest ordering value wins, as our merges do."""


class WriteOperation(enum.StrEnum):
    INSERT = "INSERT"
    UPSERT = "UPSERT"
    DELETE = "DELETE"


def create_table(
    base_path: str,
    table_name: str,
    *,
    table_type: str = MERGE_ON_READ,
    record_key_fields: Sequence[str],
    ordering_field: str | None,
    partition_fields: Sequence[str] = (),
    hive_style_partitioning: bool = False,
    schema: pa.Schema | None = None,
    extra_properties: dict[str, str] | None = None,
) -> HudiTable:
    """Create an empty table (version 6, timeline layout 1) with `.hoodie` laid out as Hudi does."""
    storage = Storage(base_path)
    if storage.exists(".hoodie/hoodie.properties"):
        raise FileExistsError(f"a Hudi table already exists at {base_path}")
    if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ValueError(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}, not {table_type}")
    if not record_key_fields:
        raise ValueError("record_key_fields must name at least one field")
    props = {
        TABLE_NAME: table_name,
        TABLE_TYPE: table_type,
        TABLE_VERSION: "6",
        TIMELINE_LAYOUT_VERSION: "1",
        RECORD_KEY_FIELDS: ",".join(record_key_fields),
        PARTITION_FIELDS: ",".join(partition_fields),
        HIVE_STYLE_PARTITIONING: str(hive_style_partitioning).lower(),
        KEY_GENERATOR_CLASS: keys.key_generator_class(record_key_fields, partition_fields),
        BASE_FILE_FORMAT: "PARQUET",
        ARCHIVELOG_FOLDER: "archived",
        POPULATE_META_FIELDS: "true",
        "hoodie.table.type.version": "6",
        "hoodie.compaction.payload.class": DEFAULT_PAYLOAD_CLASS,
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.metadata.partitions": "",
        "hoodie.partition.metafile.use.base.format": "false",
        "hoodie.database.name": "",
        "hoodie.timeline.timezone": "UTC",
    }
    if ordering_field:
        props[PRECOMBINE_FIELD] = ordering_field
    if schema is not None:
        props[CREATE_SCHEMA] = json.dumps(avro_record_schema(table_name, schema))
    props.update(extra_properties or {})
    for folder in (
        ".hoodie/archived",
        ".hoodie/.temp",
        ".hoodie/.aux/.bootstrap/.partitions",
        ".hoodie/.aux/.bootstrap/.fileids",
        ".hoodie/.schema",
    ):
        storage.makedirs(folder)
    TableConfig(props).save(storage)
    return HudiTable.open(base_path)


class HudiWriter:
    """Applies batches to one table; each batch is one commit (or delta commit)."""

    def __init__(
        self,
        table: HudiTable,
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    ) -> None:
        self.table = table
        self.max_file_rows = max_file_rows
        self.heartbeat_interval = heartbeat_interval

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
        if self.config.table_version not in (6, 7):
            raise ValueError(
                f"the writer writes table version 6; this table is version "
                f"{self.config.table_version}"
            )
        timeline = self.table.timeline()
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
        with heartbeat.Heartbeat(self.storage, instant_time, self.heartbeat_interval):
            inflight = transition(
                self.storage,
                self.config,
                requested,
                State.INFLIGHT,
                CommitMetadata(operation_type=operation.value).to_json(),
            )
            writes = self._write_files(tagged, instant_time, operation, timeline, schema_json)
            metadata = CommitMetadata(
                extra_metadata={"schema": schema_json} if schema_json else {},
                operation_type=operation.value,
            )
            for stat in writes:
                metadata.add_write_stat(stat.partition_path or "", stat)
            transition(self.storage, self.config, inflight, State.COMPLETED, metadata.to_json())
            delete_markers(self.storage, instant_time)
        return instant_time

    def _prepare(self, batch: pa.Table, instant_time: str, operation: WriteOperation) -> pa.Table:
        """Meta columns prepended; duplicates within the batch reduced to the latest."""
        config = self.config
        record_keys = keys.record_keys(batch, config.record_key_fields)
        partitions = keys.partition_paths(
            batch, config.partition_fields, config.hive_style_partitioning
        )
        data = batch.drop_columns([c for c in META_COLUMNS if c in batch.column_names])
        n = data.num_rows
        meta = {
            "_hoodie_commit_time": pa.array([instant_time] * n, pa.string()),
            "_hoodie_commit_seqno": pa.array([""] * n, pa.string()),
            "_hoodie_record_key": record_keys,
            "_hoodie_partition_path": partitions,
            "_hoodie_file_name": pa.array([""] * n, pa.string()),
        }
        tagged = pa.table({**meta, **{name: data.column(name) for name in data.column_names}})
        if operation is WriteOperation.DELETE:
            return tagged
        ordering = config.ordering_fields[0] if config.ordering_fields else None
        if ordering and ordering not in tagged.column_names:
            raise ValueError(f"ordering field {ordering!r} is missing from the batch")
        return latest_by_key(tagged, ordering)

    def _write_files(
        self,
        tagged: pa.Table,
        instant_time: str,
        operation: WriteOperation,
        timeline: Timeline,
        schema_json: str | None,
    ) -> list[WriteStat]:
        view = self.table.file_system_view(timeline)
        slices = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
        merged = {(s.partition_path, s.file_id): s for s in view.latest_merged_file_slices()}
        writes: list[WriteStat] = []
        located, new = self._locate(tagged, merged, operation)
        for partition in sorted(
            set(pc.unique(tagged.column("_hoodie_partition_path")).to_pylist())
        ):
            write_partition_metadata(self.storage, partition, instant_time)
        for (partition, file_id), rows in located.items():
            target = slices[(partition, file_id)]
            if self.config.is_merge_on_read:
                writes.append(self._append_log(target, rows, instant_time, operation, schema_json))
            else:
                writes.append(
                    self._merge_base(merged[(partition, file_id)], rows, instant_time, operation)
                )
        if operation is not WriteOperation.DELETE and new.num_rows:
            writes += self._insert_new(new, instant_time)
        return writes

    def _locate(
        self,
        tagged: pa.Table,
        merged: dict[tuple[str, str], FileSlice],
        operation: WriteOperation,
    ) -> tuple[dict[tuple[str, str], pa.Table], pa.Table]:
        """Split a batch into rows of existing file groups and rows for new ones."""
        if operation is WriteOperation.INSERT or not merged:
            return {}, tagged
        partitions = set(pc.unique(tagged.column("_hoodie_partition_path")).to_pylist())
        index_parts = []
        for (partition, file_id), file_slice in merged.items():
            if partition not in partitions or file_slice.base_file is None:
                continue
            existing = read_base_file(
                self.storage, file_slice.base_file.path, columns=["_hoodie_record_key"]
            )
            index_parts.append(
                pa.table(
                    {
                        "_hoodie_record_key": existing.column("_hoodie_record_key"),
                        "__partition": pa.array([partition] * existing.num_rows, pa.string()),
                        "__file_id": pa.array([file_id] * existing.num_rows, pa.string()),
                    }
                )
            )
        if not index_parts:
            return {}, tagged
        index = pa.concat_tables(index_parts)
        numbered = tagged.append_column("__row", pa.array(range(tagged.num_rows), pa.int64()))
        joined = numbered.select(["_hoodie_record_key", "_hoodie_partition_path", "__row"]).join(
            index,
            keys=["_hoodie_record_key", "_hoodie_partition_path"],
            right_keys=["_hoodie_record_key", "__partition"],
            join_type="inner",
        )
        located: dict[tuple[str, str], pa.Table] = {}
        for file_id in pc.unique(joined.column("__file_id")).to_pylist():
            rows = joined.filter(pc.equal(joined.column("__file_id"), file_id))
            row_ids = pc.sort_indices(rows.column("__row"))
            taken = tagged.take(pc.take(rows.column("__row"), row_ids))
            partition = taken.column("_hoodie_partition_path")[0].as_py()
            located[(partition, file_id)] = taken
        found = pc.is_in(numbered.column("__row"), value_set=joined.column("__row"))
        return located, tagged.filter(pc.invert(found))

    def _file_rows(
        self, rows: pa.Table, instant_time: str, file_name: str, partition_index: int
    ) -> pa.Table:
        n = rows.num_rows
        seqno = pc.binary_join_element_wise(
            pa.array([f"{instant_time}_{partition_index}"] * n, pa.string()),
            pc.cast(pa.array(range(n), pa.int64()), pa.string()),
            "_",
        )
        rows = rows.set_column(1, "_hoodie_commit_seqno", seqno)
        return rows.set_column(4, "_hoodie_file_name", pa.array([file_name] * n, pa.string()))

    def _insert_new(self, rows: pa.Table, instant_time: str) -> list[WriteStat]:
        writes: list[WriteStat] = []
        partitions = rows.column("_hoodie_partition_path")
        for partition in sorted(set(pc.unique(partitions).to_pylist())):
            part_rows = rows.filter(pc.equal(partitions, partition))
            for start in range(0, part_rows.num_rows, self.max_file_rows):
                chunk = part_rows.slice(start, self.max_file_rows)
                file_id = new_file_id(0)
                name = BaseFileName(file_id, WRITER_TOKEN, instant_time)
                path = f"{partition}/{name}" if partition else str(name)
                create_marker(
                    self.storage, instant_time, Marker(partition, str(name), MarkerType.CREATE)
                )
                size = write_base_file(
                    self.storage, path, self._file_rows(chunk, instant_time, str(name), len(writes))
                )
                writes.append(
                    WriteStat(
                        file_id=file_id,
                        path=path,
                        prev_commit="null",
                        partition_path=partition,
                        num_inserts=chunk.num_rows,
                        num_writes=chunk.num_rows,
                        total_write_bytes=size,
                        file_size_in_bytes=size,
                    )
                )
        return writes

    def _merge_base(
        self, file_slice: FileSlice, rows: pa.Table, instant_time: str, operation: WriteOperation
    ) -> WriteStat:
        """Copy-on-write: a new version of the base file with the batch merged in."""
        assert file_slice.base_file is not None
        ordering = self.config.ordering_fields[0] if self.config.ordering_fields else None
        existing = read_base_file(self.storage, file_slice.base_file.path)
        if operation is WriteOperation.DELETE:
            deletes = [
                DeleteVersion(key, _ordering(rows, ordering, i), 1)
                for i, key in enumerate(rows.column("_hoodie_record_key").to_pylist())
            ]
            merged = merge_versions(existing, [0] * existing.num_rows, deletes, ordering)
            updates = 0
        else:
            incoming = rows.select(existing.column_names).cast(existing.schema)
            combined = pa.concat_tables([existing, incoming])
            merged = latest_by_key(combined, ordering)
            updates = rows.num_rows
        name = BaseFileName(file_slice.file_id, WRITER_TOKEN, instant_time)
        partition = file_slice.partition_path
        path = f"{partition}/{name}" if partition else str(name)
        create_marker(self.storage, instant_time, Marker(partition, str(name), MarkerType.MERGE))
        merged = merged.set_column(
            4, "_hoodie_file_name", pa.array([str(name)] * merged.num_rows, pa.string())
        )
        size = write_base_file(self.storage, path, merged)
        deleted = existing.num_rows - merged.num_rows if operation is WriteOperation.DELETE else 0
        return WriteStat(
            file_id=file_slice.file_id,
            path=path,
            prev_commit=file_slice.base_instant_time,
            partition_path=partition,
            num_update_writes=updates,
            num_deletes=deleted,
            num_writes=merged.num_rows,
            total_write_bytes=size,
            file_size_in_bytes=size,
        )

    def _append_log(
        self,
        file_slice: FileSlice,
        rows: pa.Table,
        instant_time: str,
        operation: WriteOperation,
        schema_json: str | None,
    ) -> WriteStat:
        """Merge-on-read: a new log file in the latest slice with a data or delete block."""
        version = max((log.name.version for log in file_slice.log_files), default=0) + 1
        name = LogFileName(file_slice.file_id, file_slice.base_instant_time, version, WRITER_TOKEN)
        partition = file_slice.partition_path
        path = f"{partition}/{name}" if partition else str(name)
        create_marker(self.storage, instant_time, Marker(partition, str(name), MarkerType.APPEND))
        ordering = self.config.ordering_fields[0] if self.config.ordering_fields else None
        if operation is WriteOperation.DELETE:
            schema: dict[str, Any] = (
                json.loads(schema_json)
                if schema_json
                else avro_record_schema(self.config.table_name, rows.schema)
            )
            deletes = [
                DeleteRecord(key, partition, _ordering(rows, ordering, i))
                for i, key in enumerate(rows.column("_hoodie_record_key").to_pylist())
            ]
            size = write_log_file(
                self.storage, path, instant_time, schema, deletes=deletes, ordering_field=ordering
            )
            counts = {"num_deletes": rows.num_rows}
        else:
            rows = self._file_rows(rows, instant_time, file_slice.file_id, 0)
            schema = avro_record_schema(self.config.table_name, rows.schema)
            size = write_log_file(self.storage, path, instant_time, schema, records=rows)
            counts = {"num_update_writes": rows.num_rows, "num_writes": rows.num_rows}
        base_name = file_slice.base_file.file_name if file_slice.base_file else ""
        return WriteStat(
            file_id=file_slice.file_id,
            path=path,
            prev_commit=file_slice.base_instant_time,
            partition_path=partition,
            total_write_bytes=size,
            file_size_in_bytes=size,
            log_version=version,
            log_offset=0,
            base_file=base_name,
            log_files=[str(name)],
            total_log_blocks=1,
            **counts,
        )


def _ordering(rows: pa.Table, ordering: str | None, index: int) -> object | None:
    if ordering is None or ordering not in rows.column_names:
        return None
    value: object | None = rows.column(ordering)[index].as_py()
    return value


__all__ = ["HudiWriter", "TableNotFoundError", "WriteOperation", "create_table"]
