"""Cells of metadata records sorted by (file group, key) through local disk past a memory
budget, and written into HFiles a piece at a time: what an index build's file group task and
a clustering task's record index entries need, whatever the number of keys.

A key given twice is an error (`Repeats.REFUSE`: an index build finds a record key in two
file groups) or keeps its last value (`Repeats.LAST`: a clustering moved a key to two new
files, and the later file's location stays, as in a dict filled file by file).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.files.external_sort import ExternalSort
from tms.hudi.hfile import HFileWriter

__all__ = ["RepeatedKeyError", "Repeats", "SortedCells", "SortedPiece", "append_piece"]

GROUP, KEY, VALUE, SEQUENCE = "group", "key", "value", "sequence"


class RepeatedKeyError(ValueError):
    """A key given twice where each must be given once (`Repeats.REFUSE`)."""


class Repeats(enum.Enum):
    REFUSE = "refuse"
    LAST = "last"


@dataclass(frozen=True)
class SortedPiece:
    """Consecutive cells of one file group, in key order."""

    group: int
    keys: pa.StringArray
    values: pa.BinaryArray


class SortedCells:
    """Cells added part by part, read back sorted by file group and key (UTF-8 byte order,
    the order of an HFile's rows), holding about `budget` bytes."""

    def __init__(self, budget: int, workdir: str, repeats: Repeats) -> None:
        self._sort = ExternalSort([GROUP, KEY, SEQUENCE], budget, workdir)
        self._repeats = repeats
        self._added = 0

    @property
    def count(self) -> int:
        """Cells added (repeats included)."""
        return self._added

    def add(self, groups: np.ndarray | int, keys: pa.Array, values: pa.Array) -> None:
        """Cells of `keys` (strings, no nulls) with `values` (binary), in file groups
        `groups` (one per key, or one for all)."""
        count = len(keys)
        if not count:
            return
        group_column = np.full(count, groups, np.int32) if isinstance(groups, int) else groups
        sequence = np.arange(self._added, self._added + count, dtype=np.int64)
        self._added += count
        self._sort.add(
            pa.table(
                {
                    GROUP: pa.array(group_column, pa.int32()),
                    KEY: keys.cast(pa.string()),
                    SEQUENCE: sequence,
                    VALUE: values.cast(pa.binary()),
                }
            )
        )

    def pieces(self) -> Iterator[SortedPiece]:
        """The cells in order, each key once, a piece at a time (a piece never spans two file
        groups); `RepeatedKeyError` at a key given twice under `Repeats.REFUSE`."""
        held: SortedPiece | None = None  # the last key is held back: its repeat may follow
        for table in self._sort.sorted_tables():
            groups = table.column(GROUP).to_numpy()
            cuts = np.flatnonzero(np.diff(groups)) + 1
            for start, end in zip([0, *cuts.tolist()], [*cuts.tolist(), len(groups)], strict=True):
                piece = SortedPiece(
                    int(groups[start]),
                    table.column(KEY).slice(start, end - start).combine_chunks(),
                    table.column(VALUE).slice(start, end - start).combine_chunks(),
                )
                if held is not None and held.group == piece.group:
                    piece = _joined(held, piece)
                elif held is not None:
                    yield held
                ready, held = self._unique(piece)
                if ready is not None:
                    yield ready
        if held is not None:
            yield held

    def _unique(self, piece: SortedPiece) -> tuple[SortedPiece | None, SortedPiece]:
        """The piece without repeats, but its last key, held back."""
        keys = piece.keys
        count = len(keys)
        if count > 1:
            repeated = pc.equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
            if repeated.any():
                if self._repeats is Repeats.REFUSE:
                    key = keys[int(np.flatnonzero(repeated)[0])].as_py()
                    raise RepeatedKeyError(f"key {key!r} is given twice")
                kept = np.flatnonzero(np.append(~repeated, True))
                piece = SortedPiece(piece.group, keys.take(kept), piece.values.take(kept))
                count = len(piece.keys)
        last = _rows(piece, count - 1, count)
        return (None if count == 1 else _rows(piece, 0, count - 1)), last


def _rows(piece: SortedPiece, start: int, stop: int) -> SortedPiece:
    """Rows `start` to `stop` of a piece."""
    return SortedPiece(
        piece.group, piece.keys.slice(start, stop - start), piece.values.slice(start, stop - start)
    )


def _joined(first: SortedPiece, second: SortedPiece) -> SortedPiece:
    return SortedPiece(
        first.group,
        pa.concat_arrays([first.keys, second.keys]),
        pa.concat_arrays([first.values, second.values]),
    )


def append_piece(writer: HFileWriter, piece: SortedPiece) -> None:
    """A piece's cells into `writer` in bulk (`HFileWriter.append_rows`); the values are
    framed from their distinct ones (a record index shares one value per new file)."""
    encoded = pc.dictionary_encode(piece.values)
    values = encoded.dictionary.to_pylist()
    writer.append_rows(piece.keys, values, encoded.indices.to_numpy(zero_copy_only=False))
