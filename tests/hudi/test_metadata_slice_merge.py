"""A metadata file slice merged key by key (what its compaction writes) gives the records the
metadata reader merges in memory, on random slices: files listings combined across blocks,
record index entries replaced whole (passed through undecoded), keys deleted and written
again, rolled back and uncommitted blocks, non-ASCII keys, and delete blocks sorted through
local disk under a tiny budget."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_writer import encode_log_block, encode_rollback_block
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.metadata import slice_merge
from tms.hudi.metadata.cells import cell_value, record_cells
from tms.hudi.metadata.compaction import base_hfile_content
from tms.hudi.metadata.records import (
    MetadataRecord,
    RecordLocation,
    files_record,
    record_index_record,
)
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.slice_merge import merge_slice_by_key
from tms.hudi.metadata.slice_reader import read_slice
from tms.hudi.metadata.writer import FileGroupLog, hfile_content, log_file_content
from tms.hudi.storage import Storage

SCHEMA = writer_schema(9, None)
FILE_ID = "files-0000-0"
BASE_INSTANT = "20260101000000000"
PARTITIONS = [f"p{n:03d}" for n in range(60)] + ["é/x", "日本/東京", "z\u00ff", "a b"]


def _files(rng: random.Random, count: int) -> dict[str, int]:
    return {f"f{rng.randrange(40):02d}.parquet": rng.randrange(1, 10_000) for _ in range(count)}


def _records(rng: random.Random, count: int, record_index: bool) -> list[MetadataRecord]:
    chosen = sorted(rng.sample(PARTITIONS, count), key=lambda p: p.encode())
    out = []
    if record_index:  # record index entries: a newer one replaces the older whole
        for key in chosen:
            location = RecordLocation("p", f"file-{rng.randrange(5)}", rng.randrange(1 << 40))
            out.append(record_index_record(key, location, raw_file_id=True))
        return out
    for partition in chosen:
        added = _files(rng, rng.randrange(0, 4))
        gone = [f"f{rng.randrange(40):02d}.parquet" for _ in range(rng.randrange(0, 3))]
        out.append(files_record(partition, added, [g for g in gone if g not in added]))
    return sorted(out, key=lambda r: r.key.encode())


def _random_slice(root: Path, seed: int) -> tuple[FileSlice, set[str]]:
    """A slice (of files listings, or record index entries for an odd seed) with a base file
    and four log files of HFile, delete and rollback blocks; returns it and the instants
    that count."""
    rng = random.Random(seed)
    record_index = seed % 2 == 1  # else the files partition: listings combine
    partition = "record_index" if record_index else "files"
    folder = root / partition
    folder.mkdir(parents=True)
    base_name = BaseFileName(FILE_ID, "0-0-0", BASE_INSTANT, "hfile")
    base_cells = record_cells(_records(rng, 40, record_index), SCHEMA)
    records = [(key.decode(), value) for key, value in base_cells]
    (folder / str(base_name)).write_bytes(base_hfile_content(SCHEMA, records))
    base = BaseFile(base_name, f"{partition}/{base_name}", (folder / str(base_name)).stat().st_size)
    valid = {BASE_INSTANT}
    logs: list[LogFile] = []
    instant = int(BASE_INSTANT)
    for version in range(1, 5):
        content = b""
        for _ in range(rng.randrange(1, 4)):
            instant += 1
            time = str(instant)
            if rng.random() < 0.85:
                valid.add(time)
            cells = record_cells(_records(rng, rng.randrange(0, 25), record_index), SCHEMA)
            deleted = [*rng.sample(PARTITIONS, rng.randrange(0, 12)), "never-there"]
            deletes = [files_record(p, {}).key for p in deleted]
            write = FileGroupLog(
                partition, FileSlice(partition, FILE_ID, BASE_INSTANT), cells, deletes
            )
            content += log_file_content(time, SCHEMA, write)
            if rng.random() < 0.2:
                content += encode_rollback_block(str(instant + 1000), time)
        name = LogFileName(FILE_ID, BASE_INSTANT, version, "1-0-1")
        (folder / str(name)).write_bytes(content)
        logs.append(LogFile(name, f"{partition}/{name}", len(content)))
    return FileSlice(partition, FILE_ID, BASE_INSTANT, base, tuple(logs)), valid


@pytest.mark.parametrize("seed", range(12))
def test_a_slice_merged_key_by_key_is_the_slice_the_reader_merges(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "metadata"
    file_slice, valid = _random_slice(table, seed)
    storage = Storage(str(table))
    expected = read_slice(storage, file_slice, valid.__contains__)
    live = expected.merged()
    monkeypatch.setattr(slice_merge, "_DELETE_CHUNK", 3)  # many sorted runs per delete block
    workdir = tmp_path / "work"
    workdir.mkdir()

    merged = list(
        merge_slice_by_key(storage, file_slice, valid.__contains__, workdir=str(workdir), budget=64)
    )

    keys = [one.key for one in merged]
    assert keys == sorted(keys, key=str.encode)
    assert len(set(keys)) == len(keys)
    records = {one.key: one.record() for one in merged}
    assert {key: r.fields for key, r in records.items() if r} == {
        key: record.fields for key, record in live.items()
    }
    for one in merged:  # stored bytes passed through are the bytes encoded again
        if one.value is not None:
            assert one.cell(SCHEMA) == cell_value(live[one.key], SCHEMA)
    assert {one.key for one in merged if one.in_log} == set(expected.log)
    assert {one.key for one in merged if one.in_base} == set(expected.base)


def test_a_log_compacted_block_stands_for_the_blocks_it_names(tmp_path: Path) -> None:
    """Hudi's writer log-compacts the metadata table: instant 3 stands for 1, and 2, which
    completed after 3 was planned, still has the last word on the key it wrote after 1, in
    the reader's merge and in the key-by-key merge alike."""
    folder = tmp_path / "metadata" / "record_index"
    folder.mkdir(parents=True)
    first = RecordLocation("p", "file-1", 1)
    moved = RecordLocation("p", "file-2", 2)

    def cells(location: RecordLocation) -> Any:
        return record_cells([record_index_record("k", location, raw_file_id=True)], SCHEMA)

    def block(instant: str, location: RecordLocation, compacted: str = "") -> bytes:
        header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: SCHEMA}
        if compacted:
            header[HeaderKey.COMPACTED_BLOCK_TIMES] = compacted
        return encode_log_block(
            BlockType.HFILE_DATA, header, hfile_content(SCHEMA, cells(location))
        )

    logs = []
    instants = ("20260101000000001", "20260101000000002", "20260101000000003")
    contents = [
        block(instants[0], first),
        block(instants[1], moved),
        block(instants[2], first, compacted=instants[0]),
    ]
    for version, content in enumerate(contents, start=1):
        name = LogFileName(FILE_ID, BASE_INSTANT, version, "1-0-1")
        (folder / str(name)).write_bytes(content)
        logs.append(LogFile(name, f"record_index/{name}", len(content)))
    file_slice = FileSlice("record_index", FILE_ID, BASE_INSTANT, None, tuple(logs))
    storage = Storage(str(tmp_path / "metadata"))
    valid = set(instants).__contains__

    live = read_slice(storage, file_slice, valid).merged()
    workdir = tmp_path / "work"
    workdir.mkdir()
    merged = list(merge_slice_by_key(storage, file_slice, valid, workdir=str(workdir), budget=64))

    expected = record_index_record("k", moved, raw_file_id=True).fields
    assert live["k"].fields == expected
    assert len(merged) == 1 and merged[0].record().fields == expected  # type: ignore[union-attr]
