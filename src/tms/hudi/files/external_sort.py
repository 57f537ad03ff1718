"""Rows sorted by some columns within a memory budget: a clustering group of any size.

Rows come in parts. While they fit in a share of the budget they are held; past it, the held
rows are sorted and written to the task's local disk as a sorted run (an Arrow IPC stream of
small batches). The sorted rows then come out by merging the runs a batch at a time: each
round takes, from every run's current batch, the rows not after a bound (the smallest last
key among the runs that have more batches to read), sorts those together and hands them
out. At most `MAX_FAN_IN` runs are merged at once, so the batches held stay a fixed share of
the budget however many runs there are: more runs are first merged, `MAX_FAN_IN` at a time,
into longer runs on disk (a pass over the rows per level). Rows with equal keys keep the
order they came in; clustering sorts by the record key last, which is unique in a
partition, so the order is total.

The order is Arrow's ascending sort: nulls last, NaN after every other number.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tms.hudi.memory import read_spilled

__all__ = ["ExternalSort"]

HELD_SHARE = 4
"""Rows held in memory before a run is spilled: a quarter of the budget (sorting copies)."""
RUN_BATCHES = 64
"""Batches a held share is cut into on disk: merging reads one batch of each run at a time."""
MAX_FAN_IN = 32
"""Runs merged at once: their batches take at most MAX_FAN_IN / (HELD_SHARE * RUN_BATCHES)
of the budget (an eighth), and a round's cost grows with the runs it looks at."""


class ExternalSort:
    """Rows added part by part, read back sorted by `keys`, holding about `budget` bytes."""

    def __init__(self, keys: Sequence[str], budget: int, workdir: str) -> None:
        self.keys = list(dict.fromkeys(keys))
        self.budget = budget
        self.folder = Path(workdir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._held: list[pa.Table] = []
        self._held_bytes = 0
        self._runs: list[Path] = []
        self._spilled = 0
        self._batch_rows = 1
        self.rows = 0
        self.schema: pa.Schema | None = None
        self.merge_passes = 0
        """Intermediate merges of `MAX_FAN_IN` runs into one, done before the last merge."""

    @property
    def runs(self) -> int:
        """Sorted runs spilled to disk so far (intermediate merges not counted)."""
        return self._spilled

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        if self.schema is None:
            self.schema = rows.schema
        elif rows.schema != self.schema:
            rows = rows.cast(self.schema)
        self._held.append(rows)
        self._held_bytes += rows.nbytes
        self.rows += rows.num_rows
        if self._held_bytes > self.budget / HELD_SHARE:
            self._spill()

    def sorted_tables(self) -> Iterator[pa.Table]:
        """Every row added, in order, a part at a time."""
        if not self._runs:
            if self._held:
                yield self._sorted(pa.concat_tables(self._held))
            self._held = []
            return
        if self._held:
            self._spill()
        while len(self._runs) > MAX_FAN_IN:
            self._merge_runs()
        yield from _merge([_RunReader(path) for path in self._runs], self.keys)

    def _sorted(self, rows: pa.Table) -> pa.Table:
        return rows.sort_by([(key, "ascending") for key in self.keys])

    def _spill(self) -> None:
        rows = self._sorted(pa.concat_tables(self._held))
        self._held, self._held_bytes = [], 0
        if not self._spilled:  # later runs, and merged ones, are cut into batches of as many rows
            self._batch_rows = max(1, math.ceil(rows.num_rows / RUN_BATCHES))
        self._spilled += 1
        path = self._new_run_path()
        with pa.ipc.new_stream(str(path), rows.schema) as writer:
            writer.write_table(rows, max_chunksize=self._batch_rows)
        self._runs.append(path)

    def _merge_runs(self) -> None:
        """One level: the runs merged `MAX_FAN_IN` at a time into longer runs."""
        assert self.schema is not None
        merged: list[Path] = []
        for start in range(0, len(self._runs), MAX_FAN_IN):
            group = self._runs[start : start + MAX_FAN_IN]
            if len(group) == 1:
                merged.append(group[0])
                continue
            self.merge_passes += 1
            path = self._new_run_path()
            with pa.ipc.new_stream(str(path), self.schema) as writer:
                for table in _merge([_RunReader(run) for run in group], self.keys):
                    writer.write_table(table, max_chunksize=self._batch_rows)
            merged.append(path)
        self._runs = merged

    def _new_run_path(self) -> Path:
        """A name no run had: runs spilled and merged so far are numbered apart."""
        return self.folder / f"run-{self._spilled + self.merge_passes}.arrow"


class _RunReader:
    """One sorted run, a batch at a time: `current` is what is left of the batch read."""

    def __init__(self, path: Path) -> None:
        self._handle = read_spilled(path)
        self.current: pa.Table | None = None
        self.exhausted = False
        self._path = path

    def fill(self) -> None:
        """Read the next batch when the current one is used up."""
        while not self.exhausted and (self.current is None or self.current.num_rows == 0):
            try:
                self.current = pa.Table.from_batches([self._handle.read_next_batch()])
            except StopIteration:
                self.exhausted = True
                self._handle.close()
                self._path.unlink(missing_ok=True)

    @property
    def has_rows(self) -> bool:
        return self.current is not None and self.current.num_rows > 0


def _merge(readers: list[_RunReader], keys: list[str]) -> Iterator[pa.Table]:
    order = [(key, "ascending") for key in keys]
    while True:
        for reader in readers:
            reader.fill()
        live = [r for r in readers if r.has_rows]
        if not live:
            return
        bounded = [r for r in live if not r.exhausted]
        bound = min((_last_key(r.current, keys) for r in bounded), default=None)
        taken: list[pa.Table] = []
        for reader in live:
            current = reader.current
            assert current is not None
            count = current.num_rows if bound is None else _not_after(current, keys, bound)
            if count:
                taken.append(current.slice(0, count))
                reader.current = current.slice(count)
        yield pa.concat_tables(taken).sort_by(order)


_Key = tuple[Any, ...]
"""A row's sort key as `_rank` ranks its values: Python orders it as Arrow sorts the row."""


def _last_key(table: pa.Table, keys: list[str]) -> _Key:
    return _key(_key_columns(table, keys), table.num_rows - 1)


def _rank(value: Any, data_type: pa.DataType) -> tuple[Any, ...]:
    """A value as a tuple Python orders as Arrow's ascending sort does: nulls last, NaN after
    every other number, a struct by its fields in order (a null struct's fields as nulls)."""
    if pa.types.is_struct(data_type):
        fields = value or {}
        return (0, tuple(_rank(fields.get(field.name), field.type) for field in data_type))
    if value is None:
        return (2,)
    if isinstance(value, float) and math.isnan(value):
        return (1,)
    return (0, value)


def _key(columns: list[pa.Array], row: int) -> _Key:
    return tuple(_rank(column[row].as_py(), column.type) for column in columns)


def _key_columns(table: pa.Table, keys: list[str]) -> list[pa.Array]:
    """The key columns of a batch (one chunk each: a run's batch, or what is left of it)."""
    columns = [table.column(key) for key in keys]
    return [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in columns]


def _not_after(table: pa.Table, keys: list[str], bound: _Key) -> int:
    """How many leading rows of the sorted `table` are not after `bound` (binary search)."""
    columns = _key_columns(table, keys)
    low, high = 0, int(table.num_rows)
    while low < high:
        middle = (low + high) // 2
        if _key(columns, middle) <= bound:
            low = middle + 1
        else:
            high = middle
    return low
