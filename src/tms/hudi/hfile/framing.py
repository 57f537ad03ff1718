"""Cells framed in bulk: the bytes of many KeyValue cells (lengths, key of a latest put, value,
MVCC timestamp 0) built by Arrow and numpy from a column of rows, not one Python step a cell.
The metadata table's record index writes millions of cells whose values come from a few
distinct locations, so a value is given as an index into a small table."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.hfile.keyvalue import LATEST_PUT_TAIL

__all__ = ["KEY_EXTRA", "frame_cells"]

KEY_EXTRA = 2 + len(LATEST_PUT_TAIL)
"""Bytes of a key besides its row: the row length and the tail of a latest put."""
_LENGTHS = np.dtype([("key", ">i4"), ("value", ">i4"), ("row", ">u2")])
_MVCC_ZERO = b"\x00"


def frame_cells(
    rows: pa.BinaryArray, values: Sequence[bytes], value_of_row: np.ndarray
) -> pa.BinaryArray:
    """One element per cell, its bytes as `HFileWriter.append_cells` writes them: row `i` of
    `rows` (no nulls, each at most `MAX_ROW_LENGTH` bytes) with value `values[value_of_row[i]]`."""
    count = len(rows)
    row_lengths = pc.binary_length(rows).to_numpy(zero_copy_only=False)
    value_lengths = np.fromiter(map(len, values), dtype=np.int32, count=len(values))
    lengths = np.empty(count, dtype=_LENGTHS)
    lengths["key"] = row_lengths + KEY_EXTRA
    lengths["value"] = value_lengths[value_of_row]
    lengths["row"] = row_lengths
    prefix_offsets = np.arange(count + 1, dtype=np.int32) * _LENGTHS.itemsize
    prefixes = pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(prefix_offsets), pa.py_buffer(lengths.tobytes())]
    )
    suffix_table = pa.array([LATEST_PUT_TAIL + v + _MVCC_ZERO for v in values], pa.binary())
    suffixes = suffix_table.take(pa.array(value_of_row))
    return pc.binary_join_element_wise(prefixes, rows, suffixes, b"")
