"""The HFile reader against HBase-written fixtures, and the writer against both our reader and
HBase's byte layout (rewriting a fixture's cells with its settings gives the fixture back)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pytest
from tests.fixture_paths import HFILES

from tms.hudi.errors import HFileError
from tms.hudi.hfile import HFileReader, HFileWriter
from tms.hudi.hfile.block import read_header
from tms.hudi.hfile.format import HEADER_SIZE, BlockType, Compression, FileInfoKey
from tms.hudi.hfile.keyvalue import read_vlong, write_vlong

_NAME = re.compile(r"_(\d+)KB_(NONE|GZ)_(\d+)(?:_(\d+)_non_unique)?")
_KEY_NUMBER = re.compile(rb"(\d{9})")
DEEP_INDEX_BLOCK_SIZE = 2048
"""The index block size the deep-index fixture was written with (its leaf blocks' size)."""


@dataclass(frozen=True)
class Fixture:
    path: Path
    block_size: int
    compression: Compression
    entry_count: int
    copies_per_key: int

    @property
    def id(self) -> str:
        return self.path.stem


def _fixture(path: Path) -> Fixture:
    match = _NAME.search(path.name)
    if match is None:
        assert "no_entry" in path.name, path.name
        return Fixture(path, 16 * 1024, Compression.GZ, 0, 1)
    block_kb, codec, count, duplicates = match.groups()
    copies = 1 + int(duplicates) if duplicates else 1
    return Fixture(path, int(block_kb) * 1024, Compression[codec], int(count) * copies, copies)


FIXTURES = [_fixture(p) for p in sorted(HFILES.glob("*.hfile"))]


def test_every_fixture_is_present() -> None:
    assert len(FIXTURES) == 9
    assert {f.compression for f in FIXTURES} == {Compression.NONE, Compression.GZ}


def _value_for(key: bytes, copy: int) -> bytes:
    """Fixture values are `hudi-value-<key number>`, then `_0`, `_1`… for repeated keys."""
    numbers = _KEY_NUMBER.findall(key)
    base = b"hudi-value-" + numbers[-1]
    return base if copy == 0 else base + b"_%d" % (copy - 1)


@pytest.fixture(params=["in memory", "from a file"])
def open_hfile(request: pytest.FixtureRequest) -> Iterator[Callable[[Path], HFileReader]]:
    """An HFile read whole, or read from an open file a block at a time."""
    files: list[BinaryIO] = []

    def reader(path: Path) -> HFileReader:
        if request.param == "in memory":
            return HFileReader(path)
        files.append(path.open("rb"))
        return HFileReader(files[-1])

    yield reader
    for file in files:
        file.close()


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.id)
def test_reads_every_fixture_fully(
    fixture: Fixture, open_hfile: Callable[[Path], HFileReader]
) -> None:
    reader = open_hfile(fixture.path)
    entries = list(reader.entries())

    assert reader.num_entries == fixture.entry_count
    assert len(entries) == fixture.entry_count
    keys = [key for key, _ in entries]
    assert keys == sorted(keys)
    assert len(set(keys)) == fixture.entry_count // fixture.copies_per_key
    for i, (key, value) in enumerate(entries):
        assert value == _value_for(key, i % fixture.copies_per_key)
    if fixture.entry_count:
        assert reader.file_info[b"hudi_hfile_testing.custom_key"] == b"hudi_custom_value"
        assert reader.file_info[FileInfoKey.LAST_KEY][2:].startswith(keys[-1])


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.id)
def test_get_finds_keys_through_the_block_index(
    fixture: Fixture, open_hfile: Callable[[Path], HFileReader]
) -> None:
    reader = open_hfile(fixture.path)
    entries = list(reader.entries())
    firsts: dict[bytes, bytes] = {}
    for key, value in entries:
        firsts.setdefault(key, value)
    keys = list(firsts)
    sample = keys[:: max(1, len(keys) // 97)] + keys[-3:]

    for key in sample:
        assert reader.get(key) == firsts[key]
        assert len(reader.get_all(key)) == fixture.copies_per_key
    assert reader.get(b"") is None
    assert reader.get(b"hudi-key-") is None
    assert reader.get(b"zzz") is None
    for key in sample:
        assert reader.get(key + b"\x00") is None
        assert reader.get(key[:-1]) is None


def test_the_empty_fixture_has_no_entries_but_its_file_info() -> None:
    reader = HFileReader(HFILES / "hudi_1_0_hbase_2_4_9_no_entry.hfile")

    assert reader.num_entries == 0
    assert list(reader.entries()) == []
    assert reader.get("any") is None
    assert reader.file_info[b"bloomFilterTypeCode"] == b"DYNAMIC_V0"
    assert reader.meta_block_names == [b"bloomFilter"]


def test_the_deep_index_fixture_is_read_through_three_levels(
    open_hfile: Callable[[Path], HFileReader],
) -> None:
    reader = open_hfile(HFILES / "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile")
    assert reader.trailer.num_data_index_levels == 3
    key = next(k for i, (k, _) in enumerate(reader.entries()) if i == 7777)
    assert reader.get(key) == b"hudi-value-000007777"


def _rewrite(fixture: Fixture, index_block_size: int) -> bytes:
    reader = HFileReader(fixture.path)
    reserved = {FileInfoKey.KEY_VALUE_VERSION, FileInfoKey.MAX_MEMSTORE_TS}
    user_info = {
        k: v
        for k, v in reader.file_info.items()
        if not k.startswith(b"hfile.") and k not in reserved
    }
    writer = HFileWriter(
        block_size=fixture.block_size,
        compression=fixture.compression,
        index_block_size=index_block_size,
        file_info=user_info,
        comparator_class_name=reader.trailer.comparator_class_name,
    )
    for key, value in reader.entries():
        writer.append(key, value)
    for name in reader.meta_block_names:
        payload = reader.meta_block(name)
        assert payload is not None
        writer.add_meta_block(name, payload)
    return writer.finish()


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.id)
def test_writing_a_fixtures_cells_with_its_settings_gives_hbases_bytes(fixture: Fixture) -> None:
    index_block_size = DEEP_INDEX_BLOCK_SIZE if "deep_index" in fixture.id else 128 * 1024
    ours = _rewrite(fixture, index_block_size)
    theirs = fixture.path.read_bytes()

    assert HFileReader(ours).trailer == HFileReader(theirs).trailer
    assert read_header(ours, 0) == read_header(theirs, 0)
    assert ours == theirs


def _round_trip(
    tmp_path: Path, cells: list[tuple[bytes, bytes]], compression: Compression, **options: int
) -> HFileReader:
    path = tmp_path / "written.hfile"
    with HFileWriter(path, compression=compression, file_info={b"origin": b"tms"}, **options) as w:
        for key, value in cells:
            w.append(key, value)
    return HFileReader(path)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZ])
def test_round_trip_small(tmp_path: Path, compression: Compression) -> None:
    cells = [(b"key-%04d" % i, b"value-%d" % i * (i % 5)) for i in range(100)]
    reader = _round_trip(tmp_path, cells, compression)

    assert list(reader.entries()) == cells
    assert reader.num_entries == 100
    assert reader.trailer.compression_codec == compression
    assert reader.trailer.num_data_index_levels == 1
    assert reader.file_info[b"origin"] == b"tms"
    assert reader.get(b"key-0042") == cells[42][1]
    assert reader.get("key-0100") is None


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZ])
def test_round_trip_large_with_a_multi_level_index(
    tmp_path: Path, compression: Compression
) -> None:
    cells = [(b"record-%08d-%s" % (i, b"x" * (i % 40)), b"v%d" % i) for i in range(6000)]
    reader = _round_trip(tmp_path, cells, compression, block_size=512, index_block_size=512)

    assert reader.trailer.num_data_index_levels >= 3
    assert list(reader.entries()) == cells
    for i in range(0, 6000, 113):
        assert reader.get(cells[i][0]) == cells[i][1]
    assert reader.get(b"record-") is None
    assert reader.get(b"record-99999999") is None


def test_round_trip_non_unique_keys_across_blocks(tmp_path: Path) -> None:
    cells = [(b"k%03d" % (i // 50), b"copy-%d" % i) for i in range(1000)]
    reader = _round_trip(tmp_path, cells, Compression.GZ, block_size=256)

    assert list(reader.entries()) == cells
    assert reader.get_all(b"k007") == [v for k, v in cells if k == b"k007"]
    assert reader.get(b"k019") == b"copy-950"


def test_round_trip_of_an_empty_file(tmp_path: Path) -> None:
    reader = _round_trip(tmp_path, [], Compression.NONE)
    assert reader.num_entries == 0
    assert list(reader.entries()) == []
    assert reader.get(b"k") is None


def test_unsorted_keys_are_refused() -> None:
    writer = HFileWriter()
    writer.append(b"b", b"1")
    with pytest.raises(HFileError, match="sorted"):
        writer.append(b"a", b"2")


def test_unsupported_compression_is_refused() -> None:
    with pytest.raises(HFileError, match="SNAPPY"):
        HFileWriter(compression=Compression.SNAPPY)


def test_a_corrupted_block_fails_its_checksum() -> None:
    data = bytearray((HFILES / "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile").read_bytes())
    data[HEADER_SIZE + 100] ^= 0x01
    reader = HFileReader(bytes(data))
    with pytest.raises(HFileError, match="checksum"):
        list(reader.entries())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not an hfile" * 500,
        (HFILES / "hudi_1_0_hbase_2_4_9_no_entry.hfile").read_bytes()[:-5],
    ],
    ids=["empty", "garbage", "truncated"],
)
def test_bytes_that_are_no_hfile_raise_hfile_error(data: bytes) -> None:
    with pytest.raises(HFileError):
        HFileReader(data)


def test_written_blocks_carry_hbases_header_fields() -> None:
    writer = HFileWriter(compression=Compression.GZ, block_size=1024)
    for i in range(500):
        writer.append(b"key-%05d" % i, b"value")
    written = writer.finish()
    first, second = (
        read_header(written, 0),
        read_header(written, read_header(written, 0).on_disk_size),
    )

    assert first.magic == second.magic == BlockType.DATA
    assert (first.prev_block_offset, second.prev_block_offset) == (-1, 0)
    assert (first.checksum_type, first.bytes_per_checksum) == (2, 16384)
    assert (
        first.on_disk_size_without_header == first.on_disk_data_size_with_header - HEADER_SIZE + 4
    )


@pytest.mark.parametrize(
    "value", [0, 1, -1, 127, -112, -113, 128, 255, 1 << 20, -(1 << 40), (1 << 63) - 1]
)
def test_hadoop_vlong_round_trips(value: int) -> None:
    encoded = write_vlong(value)
    assert read_vlong(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    "name",
    [
        "hudi_1_0_hbase_2_4_9_16KB_NONE_5000",
        "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index",
    ],
)
def test_damaged_index_and_trailer_bytes_raise_only_hfile_error(name: str) -> None:
    """With checksums off, damage in the trailer, the load-on-open section or a block header
    must still end in HFileError, never in a struct or index error."""
    original = (HFILES / f"{name}.hfile").read_bytes()
    load_on_open = HFileReader(original).trailer.load_on_open_data_offset
    structural = [*range(HEADER_SIZE), *range(load_on_open, len(original) - 4096 + 120)]
    rng = random.Random(name)
    failures = 0
    for _ in range(300):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.choice(structural)] = rng.randrange(256)
        try:
            reader = HFileReader(bytes(damaged), verify_checksums=False)
            list(reader.entries())
            reader.get(b"hudi-key-000000100")
        except HFileError:
            failures += 1
    assert failures > 0


def test_a_v3_trailer_with_hudis_version_int_is_read() -> None:
    """Hudi's own writer has stored the version as `3 << 24` (major 0) after a v3 trailer."""
    writer = HFileWriter()
    writer.append(b"k1", b"v1")
    written = writer.finish()
    hudi_style = written[:-4] + (3 << 24).to_bytes(4, "big")

    assert list(HFileReader(hudi_style).entries()) == [(b"k1", b"v1")]


def test_the_crc32c_of_blocks_is_castagnolis() -> None:
    """The C implementation and the table-driven one agree, on the standard check value and
    on data of every length around a chunk."""
    from tms.hudi.hfile.checksum import crc32c, crc32c_python

    assert crc32c(b"123456789") == crc32c_python(b"123456789") == 0xE3069283
    data = bytes(range(256)) * 80
    for size in (0, 1, 7, 16383, 16384, 16385, len(data)):
        assert crc32c(data[:size]) == crc32c_python(data[:size])


def _bulk_cases() -> list[tuple[list[bytes], list[bytes], list[int]]]:
    """Sorted rows (some repeated, some empty, bytes above 0x7F) with values from small tables."""
    rng = random.Random(11)
    cases = []
    for count in (1, 2, 7, 300, 2500):
        rows = sorted(
            bytes(rng.randrange(256) for _ in range(rng.randrange(6))) for _ in range(count)
        )
        values = [bytes([n]) * rng.randrange(200) for n in range(rng.randrange(1, 5))]
        cases.append((rows, values, [rng.randrange(len(values)) for _ in rows]))
    # cells of 30 bytes: a block of 90 reaches its size exactly
    cases.append(([b"r%03d" % n for n in range(200)], [b"value"], [0] * 200))
    return cases


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZ])
@pytest.mark.parametrize(
    ("block_size", "index_block_size"), [(1, 64), (90, 128), (150, 128), (65536, 131072)]
)
def test_rows_appended_in_bulk_are_the_bytes_of_cells_appended_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
    compression: Compression,
    block_size: int,
    index_block_size: int,
) -> None:
    monkeypatch.setattr("tms.hudi.hfile.writer._FRAMED_ROWS", 97)  # several framing steps
    options = {"block_size": block_size, "index_block_size": index_block_size}
    for rows, values, value_of_row in _bulk_cases():
        one_by_one = HFileWriter(compression=compression, **options)
        one_by_one.append_cells(
            [(row, values[v]) for row, v in zip(rows, value_of_row, strict=True)]
        )
        bulk = HFileWriter(compression=compression, **options)
        split = len(rows) // 3
        bulk.append_cells(
            [(row, values[v]) for row, v in zip(rows[:split], value_of_row[:split], strict=True)]
        )
        column = pa.array(rows[split:], pa.binary())
        at = len(column) // 2
        indexes = np.array(value_of_row[split:], dtype=np.int64)
        bulk.append_rows(column.slice(0, at), values, indexes[:at])
        bulk.append_rows(column.slice(at, 0), values, indexes[at:at])
        bulk.append_rows(column.slice(at), values, indexes[at:])
        assert bulk.finish() == one_by_one.finish()


def test_rows_appended_in_bulk_from_strings_are_their_utf8_bytes() -> None:
    keys = sorted(["a", "ü", "z", "日本", "𝄞"], key=lambda k: k.encode())
    one_by_one = HFileWriter()
    for key in keys:
        one_by_one.append(key, b"v")
    bulk = HFileWriter()
    bulk.append_rows(pa.array(keys), [b"v"], np.zeros(len(keys), dtype=np.int64))
    assert bulk.finish() == one_by_one.finish()


def test_rows_appended_in_bulk_out_of_order_or_too_long_are_refused_whole() -> None:
    zeros = np.zeros(3, dtype=np.int64)
    writer = HFileWriter()
    writer.append(b"b", b"1")
    with pytest.raises(HFileError, match="sorted"):
        writer.append_rows(pa.array([b"a", b"c", b"d"]), [b"v"], zeros)
    with pytest.raises(HFileError, match="sorted"):
        writer.append_rows(pa.array([b"c", b"e", b"d"]), [b"v"], zeros)
    with pytest.raises(HFileError, match="longer"):
        writer.append_rows(pa.array([b"c", b"d" * 0x8000, b"e"]), [b"v"], zeros)
    assert HFileReader(writer.finish()).num_entries == 1


def test_a_file_written_to_a_path_is_the_same_file_written_block_by_block(
    tmp_path: Path,
) -> None:
    """Written to a path, the blocks leave the writer as they are made: the file holds the
    bytes an HFile in memory would, while the writer holds about one block."""
    cells = [(b"key-%07d" % i, b"value-%d" % (i * 7919) * 3) for i in range(60_000)]
    options = {"block_size": 1024, "index_block_size": 512, "compression": Compression.GZ}
    in_memory = HFileWriter(**options)
    in_memory.append_cells(cells)
    path = tmp_path / "streamed.hfile"
    streamed = HFileWriter(path, **options)
    held: list[int] = []
    for start in range(0, len(cells), 5_000):
        streamed.append_cells(cells[start : start + 5_000])
        held.append(len(streamed._out) + len(streamed._cells))
    size = streamed.close()

    expected = in_memory.finish()
    assert size == len(expected) == path.stat().st_size
    assert path.read_bytes() == expected
    assert max(held) < 16 * 1024, held
    with path.open("rb") as file:
        reader = HFileReader(file)
        assert reader.trailer.num_data_index_levels >= 2
        assert list(reader.entries()) == cells
        assert reader.get(b"key-0031337") == cells[31337][1]
    with pytest.raises(HFileError, match="close"):
        streamed.finish()


def test_a_file_read_block_by_block_reports_a_truncated_file(tmp_path: Path) -> None:
    writer = HFileWriter()
    writer.append_cells([(b"k%05d" % i, b"v" * 100) for i in range(1000)])
    data = writer.finish()
    path = tmp_path / "cut.hfile"
    path.write_bytes(data[:100] + data[-4096:])
    with path.open("rb") as file, pytest.raises(HFileError):
        list(HFileReader(file).entries())
