"""The data table as an index build sees it: its latest file slices as of an instant, and what
one slice holds (its live record keys, its base file's column ranges), read in a Spark task.

A slice's records merge as compaction merges them (`files.spilled_slice.merge_file_slice`: log
blocks of instants completed by the cut, deletes applied, virtual keys computed, bucket by
bucket through local disk past the task's memory budget); a slice that is only a base file of
a table storing its keys is read by its key column alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.files.fs_view import FileSlice, FileSystemView
from tms.hudi.files.spilled_slice import merge_file_slice
from tms.hudi.memory import task_workdir
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.metadata.column_stats import ColumnRange, file_ranges
from tms.hudi.metadata.index_build.spec import DataTable
from tms.hudi.metadata.index_defs import IndexVersion
from tms.hudi.record_keys import KeyGeneration, virtual_key_generation
from tms.hudi.storage import Storage
from tms.hudi.timeline.timeline import Timeline

__all__ = ["SliceReading", "latest_slices", "timeline_as_of"]

KEY_BYTES = 64
"""A record key's size in a batch, as a Python string (a UUID is 85 bytes, a short key 50)."""
KEY_BATCH_SHARE = 16
"""A batch of keys takes at most this share of the budget: the batches wait in Spark's
serializer while the merge goes on."""


def timeline_as_of(timeline: Timeline, instant_time: str) -> Timeline:
    """The timeline cut after `instant_time`: later requests are not there yet."""
    earlier = tuple(i for i in timeline.instants if not i.requested_time > instant_time)
    return dataclasses.replace(timeline, instants=earlier)


def latest_slices(
    table: DataTable, timeline: Timeline, partitions: Collection[str] | None = None
) -> list[FileSlice]:
    """Every data file group's latest merged slice under `timeline`, by partition and id."""
    view = FileSystemView.build(table.storage, timeline, partitions=partitions)
    slices = [s for p in view.partitions for s in view.latest_merged_file_slices(p)]
    return sorted(slices, key=lambda s: (s.partition_path, s.file_id))


@dataclass(frozen=True)
class SliceReading:
    """How a task reads the data table's slices as of one cut (small and picklable)."""

    base_path: str
    ordering_fields: tuple[str, ...]
    schema: pa.Schema | None
    committed: frozenset[str]
    archived_before: str
    keys: KeyGeneration | None = None
    columns: tuple[str, ...] = ()
    version: IndexVersion = IndexVersion.V1
    memory_budget: int = field(kw_only=True)
    """Bytes of records a task may hold while it merges a slice (spilling past them)."""

    @classmethod
    def of(
        cls,
        table: DataTable,
        timeline: Timeline,
        columns: tuple[str, ...] = (),
        version: IndexVersion = IndexVersion.V1,
        *,
        memory_budget: int,
    ) -> SliceReading:
        """The reading of `timeline` (already cut): its completed instants count."""
        schema_json = timeline.latest_schema()
        schema = (
            arrow_schema_from_avro(with_meta_fields(json.loads(schema_json)))
            if schema_json
            else None
        )
        keys = virtual_key_generation(table.config)
        return cls(
            base_path=table.base_path,
            ordering_fields=record_merging(table.config).compared_fields,
            schema=schema,
            committed=frozenset(i.requested_time for i in timeline.completed()),
            archived_before=timeline.instants[0].requested_time if timeline.instants else "",
            keys=keys,
            columns=columns,
            version=version,
            memory_budget=memory_budget,
        )

    def is_committed(self, instant_time: str) -> bool:
        return instant_time in self.committed or instant_time < self.archived_before

    def record_key_batches(self, file_slice: FileSlice) -> Iterator[list[str]]:
        """The live record keys of a slice, a batch at a time (of about the budget's share:
        a slice's keys may be far more than a task holds)."""
        storage = Storage(self.base_path)
        base = file_slice.base_file
        rows = max(1, self.memory_budget // KEY_BATCH_SHARE // KEY_BYTES)
        if base is not None and not file_slice.log_files and self.keys is None:
            with storage.open_ranged(base.path) as source:
                parquet = pq.ParquetFile(source)
                for batch in parquet.iter_batches(rows, columns=[RECORD_KEY]):
                    yield [str(k) for k in batch.column(0).to_pylist()]
            return
        with task_workdir() as workdir:  # merged as compaction merges, within the budget
            merge = merge_file_slice(
                storage,
                file_slice,
                self.ordering_fields,
                self.is_committed,
                budget=self.memory_budget,
                workdir=workdir,
                schema=self.schema,
                keys=self.keys,
            )
            for part in merge.parts:
                column = part.rows.column(RECORD_KEY)
                for start in range(0, len(column), rows):
                    yield [str(k) for k in column.slice(start, rows).to_pylist()]

    def record_keys(self, file_slice: FileSlice) -> list[str]:
        """The live record keys of a slice (all of them: for tests and small slices)."""
        return [key for batch in self.record_key_batches(file_slice) for key in batch]

    def base_file_ranges(self, file_slice: FileSlice) -> list[ColumnRange]:
        """The column ranges of the slice's base file, from its footer (none without one)."""
        if file_slice.base_file is None or not self.columns:
            return []
        storage = Storage(self.base_path)
        return file_ranges(storage, file_slice.base_file.path, self.columns, self.version)
