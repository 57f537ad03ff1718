"""Metadata cells sorted by file group and key through local disk: the order an HFile's rows
need, each key once, whatever the budget."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tms.hudi.hfile import HFileReader, HFileWriter
from tms.hudi.metadata.index_build.files import NewFileGroup, write_new_file_group
from tms.hudi.metadata.partitions import RECORD_INDEX
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.sorted_cells import Repeats, SortedCells, append_piece

KEYS = ["a", "b", "é", "日本", "z\u00ff", "ab", "a\x00", "zz", "0", "Ω"]


def _added(rng: random.Random, count: int) -> list[tuple[int, str, bytes]]:
    return [
        (rng.randrange(3), f"{rng.choice(KEYS)}{rng.randrange(count)}", b"v%d" % n)
        for n in range(count)
    ]


@pytest.mark.parametrize("budget", [1 << 30, 2048], ids=["in memory", "spilled"])
@pytest.mark.parametrize("seed", range(4))
def test_cells_come_back_by_group_and_key_with_the_last_value_of_a_repeated_key(
    tmp_path: Path, budget: int, seed: int
) -> None:
    rng = random.Random(seed)
    added = _added(rng, 5000)
    cells = SortedCells(budget, str(tmp_path), Repeats.LAST)
    for start in range(0, len(added), 700):
        part = added[start : start + 700]
        cells.add(
            np.array([g for g, _, _ in part], np.int32),
            pa.array([k for _, k, _ in part]),
            pa.array([v for _, _, v in part]),
        )
    expected: dict[tuple[int, str], bytes] = {}
    for group, key, value in added:
        expected[(group, key)] = value  # the last one stays

    got = [
        (piece.group, key, value)
        for piece in cells.pieces()
        for key, value in zip(piece.keys.to_pylist(), piece.values.to_pylist(), strict=True)
    ]

    assert got == sorted(
        ((g, k, v) for (g, k), v in expected.items()), key=lambda c: (c[0], c[1].encode())
    )
    assert cells.count == len(added)


def test_a_repeated_key_is_refused_where_the_index_must_hold_each_key_once(tmp_path: Path) -> None:
    cells = SortedCells(1 << 30, str(tmp_path), Repeats.REFUSE)
    cells.add(0, pa.array(["k1", "k2"]), pa.array([b"1", b"2"]))
    cells.add(0, pa.array(["k2"]), pa.array([b"3"]))
    with pytest.raises(ValueError, match="'k2' is given twice"):
        list(cells.pieces())


def test_pieces_written_into_an_hfile_read_back_in_order(tmp_path: Path) -> None:
    cells = SortedCells(4096, str(tmp_path / "sort"), Repeats.REFUSE)
    keys = [f"key-{n:06d}" for n in range(20_000)]
    random.Random(7).shuffle(keys)
    cells.add(0, pa.array(keys), pa.array([k.encode()[::-1] for k in keys]))
    writer = HFileWriter(tmp_path / "out.hfile", block_size=4096)
    for piece in cells.pieces():
        append_piece(writer, piece)
    writer.close()

    read = list(HFileReader(tmp_path / "out.hfile").entries())
    assert [k for k, _ in read] == sorted(k.encode() for k in keys)
    assert all(v == k[::-1] for k, v in read)


def test_an_index_build_refuses_a_record_key_found_in_two_file_groups(tmp_path: Path) -> None:
    """A key routed twice to one new file group stops the build, naming the key, before its
    base file is written."""
    target = NewFileGroup(str(tmp_path), "20260101000000000", writer_schema(9, None), 4096)
    parts = [
        (pa.array([f"key-{n:05d}" for n in range(0, 3000, 2)]), pa.array([b"v"] * 1500)),
        (pa.array(["key-01234"]), pa.array([b"w"])),
    ]
    with pytest.raises(ValueError, match=r"record_index: key 'key-01234' is given twice by"):
        write_new_file_group(target, RECORD_INDEX, 0, parts, "1-0-1")
    assert not list(tmp_path.glob("record_index/*.hfile"))
