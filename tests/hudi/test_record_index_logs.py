"""The record index log files a clustering's tasks write: each new file's keys share one cell
value, encoded once, and keys are hashed and routed in bulk. The log files must be exactly what
building, encoding and appending every record on its own writes (the reference below), and read
back through our reader and fastavro as every key's new location."""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.log_writer import encode_log_block
from tms.hudi.hfile import Compression, HFileReader, HFileWriter
from tms.hudi.hfile.format import FileInfoKey
from tms.hudi.metadata.cells import location_record
from tms.hudi.metadata.keys import java_string_hash, java_string_hashes
from tms.hudi.metadata.partitions import RECORD_INDEX, MetadataPartition, file_group_index
from tms.hudi.metadata.record_index_logs import RecordIndexLogs, write_record_index_logs
from tms.hudi.metadata.records import RecordLocation, instant_millis
from tms.hudi.metadata.schema import (
    METADATA_RECORD_0X,
    METADATA_RECORD_1X,
    encode_record,
    parsed_schema,
)
from tms.hudi.metadata.slice_reader import SCHEMA_INFO_KEY, hfile_records
from tms.hudi.metadata.writer import KV_COMPARATOR
from tms.hudi.storage import Storage
from tms.hudi.timeline.layout import TimelineLayout

INSTANT = "20261127120000123"
CREATED = 1_700_000_000.0
"""The clock during a write, so the HFile's create time is known."""
GROUPS = 5

KEYS = [
    "",
    "a",
    "key-000000001",
    "key-000000002",
    "Ключ-7",
    "日本語のキー",
    "emoji-𝄞-key",
    "ü",
    "mixed-ascii-ü-and-𝄞",
    "k$with\\escapes",
    *(f"key-{i:09d}" for i in range(10, 400)),
    *(str(uuid.UUID(int=i * 7919)) for i in range(1, 200)),
]
MOVED_FILES = [
    ("city=san_francisco", "3b7c8e5a-1f2d-4e6a-9b0c-1d2e3f4a5b6c-0"),
    ("2026/11/27", "3b7c8e5a-1f2d-4e6a-9b0c-1d2e3f4a5b6c-12"),
    ("", "9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0"),
    ("région=ü", "custom-file-group"),
    ("p", "not-a-uuid-0"),
]


def moved_files() -> list[tuple[str, str, list[str]]]:
    """The keys spread over the new files, unevenly; one new file without keys."""
    return [
        *(
            (partition, file_id, KEYS[n :: len(MOVED_FILES)])
            for n, (partition, file_id) in enumerate(MOVED_FILES)
        ),
        ("empty", "0f0e0d0c-0b0a-0908-0706-050403020100-0", []),
    ]


def target(root: Path, schema: str, layout_version: int) -> RecordIndexLogs:
    owner = MetadataPartition(RECORD_INDEX)
    base_instant = "20261127000000000"
    slices = tuple(
        FileSlice(RECORD_INDEX, owner.file_group_id(n), base_instant) for n in range(GROUPS)
    )
    folder = ".hoodie/timeline" if layout_version >= 2 else ".hoodie"
    layout = TimelineLayout(layout_version, folder)
    return RecordIndexLogs(str(root), INSTANT, schema, layout, slices, 1)


def reference_log_files(
    schema: str, moved: list[tuple[str, str, list[str]]] | None = None
) -> dict[int, bytes]:
    """Each file group's log file content as written one record at a time: a record per key,
    routed by the per-key hash, sorted by UTF-8 key, encoded and appended one by one (of a
    key moved twice, the later location)."""
    owner = MetadataPartition(RECORD_INDEX)
    millis = instant_millis(INSTANT)
    groups: dict[int, dict[str, dict[str, object]]] = {}
    for partition, file_id, keys in moved_files() if moved is None else moved:
        location = RecordLocation(partition, file_id, millis)
        for key in keys:
            record = location_record(key, location)
            groups.setdefault(owner.file_group_of(key, GROUPS), {})[key] = record.fields
    contents: dict[int, bytes] = {}
    for index, records in groups.items():
        writer = HFileWriter(
            compression=Compression.GZ,
            comparator_class_name=KV_COMPARATOR,
            file_info={
                SCHEMA_INFO_KEY: schema.encode("utf-8"),
                FileInfoKey.CREATE_TIME_TS: struct.pack(">q", int(CREATED * 1000)),
            },
        )
        for key in sorted(records, key=lambda k: k.encode("utf-8")):
            writer.append(key.encode("utf-8"), encode_record(records[key], schema))
        header = {HeaderKey.INSTANT_TIME: INSTANT, HeaderKey.SCHEMA: schema}
        contents[index] = encode_log_block(BlockType.HFILE_DATA, header, writer.finish())
    return contents


def assert_bytes_of_one_record_at_a_time(
    root: Path, stats: list[WriteStat], expected: dict[int, bytes]
) -> list[HFileReader]:
    """The log files of `stats` are the `expected` bytes, their stats true; their HFiles."""
    written = {file_group_index(str(stat.file_id)): stat for stat in stats}
    assert sorted(written) == sorted(expected)
    storage = Storage(str(root))
    readers = []
    for index, stat in written.items():
        content = storage.read_bytes(str(stat.path))
        assert content == expected[index]
        assert stat.file_size_in_bytes == len(content)
        (block,) = read_log_blocks(content)
        readers.append(HFileReader(block.content))
        assert stat.num_writes == readers[-1].num_entries
    return readers


@pytest.mark.parametrize(
    ("schema", "layout_version"), [(METADATA_RECORD_1X, 2), (METADATA_RECORD_0X, 1)]
)
def test_log_files_are_the_bytes_of_one_record_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: str, layout_version: int
) -> None:
    monkeypatch.setattr("tms.hudi.metadata.writer.time.time", lambda: CREATED)
    stats = write_record_index_logs(
        target(tmp_path, schema, layout_version), moved_files(), "1-2-3"
    )
    assert_bytes_of_one_record_at_a_time(tmp_path, stats, reference_log_files(schema))


def test_many_keys_and_keys_moved_twice_are_the_bytes_of_one_record_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Log files of several data blocks each, and keys that two new files (or one twice) hold."""
    monkeypatch.setattr("tms.hudi.metadata.writer.time.time", lambda: CREATED)
    many = [f"key-{i:09d}" for i in range(12_000)]
    moved = [
        ("p1", "3b7c8e5a-1f2d-4e6a-9b0c-1d2e3f4a5b6c-0", many[::2]),
        ("p2", "not-a-uuid-0", [*many[1::2], "twice", "twice"]),
        ("p3", "9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0", [*many[100:300], "twice", "Ключ-7"]),
        ("p1", "custom-file-group", ["Ключ-7", *many[:50]]),
    ]
    stats = write_record_index_logs(target(tmp_path, METADATA_RECORD_1X, 2), moved, "1-2-3")
    expected = reference_log_files(METADATA_RECORD_1X, moved)
    for reader in assert_bytes_of_one_record_at_a_time(tmp_path, stats, expected):
        assert reader.trailer.data_index_count > 1
    assert sum(stat.num_writes for stat in stats) == len(many) + 2


def test_keys_given_as_arrow_columns_are_the_bytes_of_keys_given_as_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tms.hudi.metadata.writer.time.time", lambda: CREATED)
    forms: list[Callable[[list[str]], pa.Array | pa.ChunkedArray]] = [
        pa.array,
        lambda keys: pa.chunked_array([keys[:3], keys[3:]], pa.string()),
        lambda keys: pa.array(keys, pa.large_string()),
        lambda keys: pa.array(["skipped", *keys])[1:],
    ]
    moved = [
        (partition, file_id, forms[n % len(forms)](keys))
        for n, (partition, file_id, keys) in enumerate(moved_files())
    ]
    stats = write_record_index_logs(target(tmp_path, METADATA_RECORD_1X, 2), moved, "1-2-3")
    assert_bytes_of_one_record_at_a_time(tmp_path, stats, reference_log_files(METADATA_RECORD_1X))
    with pytest.raises(ValueError, match="null"):
        write_record_index_logs(
            target(tmp_path, METADATA_RECORD_1X, 2), [("p", "f-0", pa.array(["a", None]))], "1"
        )


def test_log_files_read_back_as_every_keys_new_location(tmp_path: Path) -> None:
    stats = write_record_index_logs(target(tmp_path, METADATA_RECORD_1X, 2), moved_files(), "0-1-2")
    storage = Storage(str(tmp_path))
    millis = instant_millis(INSTANT)
    expected = {
        key: (partition, file_id) for partition, file_id, keys in moved_files() for key in keys
    }
    found: dict[str, tuple[str, str]] = {}
    owner = MetadataPartition(RECORD_INDEX)
    for stat in stats:
        index = file_group_index(str(stat.file_id))
        (block,) = read_log_blocks(storage.read_bytes(str(stat.path)))
        assert block.block_type is BlockType.HFILE_DATA
        reader = HFileReader(block.content)
        rows = [row for row, _ in reader.entries()]
        assert rows == sorted(rows)
        for row, value in reader.entries():
            key = row.decode("utf-8")
            assert owner.file_group_of(key, GROUPS) == index
            # fastavro on its own, under the schema the block carries
            raw = fastavro.schemaless_reader(io.BytesIO(value), parsed_schema(METADATA_RECORD_1X))
            assert isinstance(raw, dict)
            assert raw["key"] == ""
            info = raw["recordIndexMetadata"]
            assert info["instantTime"] == millis
            location = next(r for r in hfile_records(reader, [key])).record_location()
            assert location is not None
            found[key] = (location.partition_path, location.file_id)
            if info["fileIdEncoding"] == 1:
                assert info["fileId"] == location.file_id
    assert found == expected


def test_bulk_hash_and_routing_match_one_key_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [*KEYS, "\ud800", "x" * 5000, "\x00", "$", "🙂" * 3]
    assert java_string_hashes(values).tolist() == [java_string_hash(v) for v in values]
    assert java_string_hashes([]).tolist() == []
    ascii_values = [v for v in values if v.isascii()]
    arrow_values = [v for v in values if v != "\ud800"]  # Arrow holds UTF-8 only
    for column in (
        pa.array(arrow_values),
        pa.array(ascii_values),
        pa.array(["skipped", *ascii_values])[1:],
    ):
        expected = [java_string_hash(v) for v in column.to_pylist()]
        assert java_string_hashes(column).tolist() == expected
        with monkeypatch.context() as patch:
            patch.setattr("tms.hudi.metadata.keys._HASH_CHUNK", 3)
            assert java_string_hashes(column).tolist() == expected
    assert java_string_hashes(pa.array(["", ""])).tolist() == [0, 0]
    for one_length in ([str(uuid.UUID(int=i * 7919)) for i in range(50)], ["ü𝄞", "日本語", "abc"]):
        expected = [java_string_hash(v) for v in one_length]
        assert java_string_hashes(one_length).tolist() == expected
        assert java_string_hashes(pa.array(one_length)).tolist() == expected
    for name, version in [(RECORD_INDEX, 1), ("secondary_index_idx", 2)]:
        owner = MetadataPartition(name)
        keys = [f"{v}$rk{n}" for n, v in enumerate(KEYS)] if version == 2 else KEYS
        for count in (1, 3, 10):
            routed = owner.keys_by_file_group(keys, count, version)
            expected: dict[int, list[str]] = {}
            for key in keys:
                expected.setdefault(owner.file_group_of(key, count, version), []).append(key)
            assert routed == expected
        assert owner.keys_by_file_group([], 3, version) == {}
