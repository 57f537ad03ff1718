"""Metadata table records on their own: combining two records of one key as Hudi does, keys
built and taken apart, routing to file groups, the hashed ids and the schema choice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.hudi.test_fixture_views import unzip_fixture

from tms.hudi.metadata.keys import (
    java_string_hash,
    partition_identifier,
    secondary_index_key,
    split_secondary_index_key,
)
from tms.hudi.metadata.partitions import MetadataPartition, file_group_index
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import (
    NAMESPACE,
    MetadataRecord,
    RecordLocation,
    RecordType,
    combine,
    files_record,
    java_hash_map_order,
    record_index_record,
    secondary_index_record,
)
from tms.hudi.metadata.schema import (
    METADATA_RECORD_0X,
    METADATA_RECORD_1X,
    decode_record,
    encode_record,
    writer_schema,
)
from tms.hudi.metadata.stats_keys import column_id, file_id, partition_id, xxhash64
from tms.hudi.storage import Storage


def listing(record: MetadataRecord | None) -> dict[str, tuple[int, bool]]:
    assert record is not None
    return {name: (info.size, info.is_deleted) for name, info in record.files().items()}


def test_files_combine_deletions_win_sizes_grow_and_unknown_tombstones_carry() -> None:
    older = files_record("p", {"a": 10, "b": 20})
    newer = files_record("p", {"b": 15, "c": 5}, ["a", "zombie"])
    merged = combine(older, newer)
    assert listing(merged) == {"b": (20, False), "c": (5, False), "zombie": (0, True)}
    again = combine(merged, files_record("p", {}, ["zombie"]))
    assert listing(again)["zombie"] == (0, True)
    assert combine(merged, files_record("p", {"b": 99})).live_files()["b"] == 99  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="size > 0"):
        files_record("p", {"empty": 0})


def test_a_delete_wins_and_a_later_record_starts_afresh() -> None:
    record = files_record("p", {"a": 1})
    assert combine(record, None) is None
    assert combine(None, record) is record
    with pytest.raises(ValueError, match="cannot combine keys"):
        combine(record, files_record("q", {"a": 1}))


def stats(
    low: int, high: int, count: int, *, tight: bool = False, deleted: bool = False
) -> MetadataRecord:
    wrapper = NAMESPACE + "LongWrapper"
    fields = {
        "key": "",
        "type": int(RecordType.COLUMN_STATS),
        "ColumnStatsMetadata": {
            "fileName": "f.parquet",
            "columnName": "c",
            "minValue": (wrapper, {"value": low}),
            "maxValue": (wrapper, {"value": high}),
            "valueCount": count,
            "nullCount": 1,
            "totalSize": 100,
            "totalUncompressedSize": 200,
            "isDeleted": deleted,
            "isTightBound": tight,
            "valueType": {"typeOrdinal": 4, "additionalInfo": None},
        },
    }
    return MetadataRecord("k", fields)


def test_column_stats_widen_unless_the_newer_is_a_tombstone_or_a_tight_bound() -> None:
    merged = combine(stats(5, 9, 3), stats(1, 7, 2))
    assert merged is not None
    cs = merged.column_stats()
    assert cs is not None
    assert (cs.min_value.value, cs.max_value.value) == (1, 9)  # type: ignore[union-attr]
    assert (cs.value_count, cs.null_count, cs.total_size) == (5, 2, 200)
    assert cs.value_type is None  # Hudi's builder drops it
    tight = combine(stats(5, 9, 3), stats(6, 7, 2, tight=True))
    assert tight is not None and tight.column_stats().min_value.value == 6  # type: ignore[union-attr]
    gone = combine(stats(5, 9, 3), stats(0, 0, 0, deleted=True))
    assert gone is not None and gone.column_stats().is_deleted  # type: ignore[union-attr]


def test_record_index_and_secondary_index_take_the_newer_record() -> None:
    old = record_index_record("k", RecordLocation("p", "0f5c0b5e-2a4e-4c1f-9d3b-1a2b3c4d5e6f-0", 1))
    new = record_index_record("k", RecordLocation("q", "custom-file-group", 2), raw_file_id=True)
    assert combine(old, new) is new
    location = new.record_location()
    assert location == RecordLocation("q", "custom-file-group", 2)
    assert old.record_location().file_id == "0f5c0b5e-2a4e-4c1f-9d3b-1a2b3c4d5e6f-0"  # type: ignore[union-attr]
    entry = secondary_index_record(secondary_index_key("v", "k"), is_deleted=True)
    assert entry.secondary_is_deleted()


def test_records_encode_under_the_1x_schema_and_decode_back() -> None:
    for record in (
        files_record("", {"f.parquet": 7}),
        record_index_record("k", RecordLocation("p", "0f5c0b5e-2a4e-4c1f-9d3b-1a2b3c4d5e6f", 5)),
        stats(1, 2, 3),
    ):
        data = encode_record(record.fields, METADATA_RECORD_1X)
        again = decode_record(data, METADATA_RECORD_1X)
        assert MetadataRecord(record.key, again).type == record.type
        assert encode_record(again, METADATA_RECORD_1X) == data


def test_secondary_keys_escape_as_hudi_does() -> None:
    key = secondary_index_key("a$b\\c", "r$1")
    assert key == "a\\$b\\\\c$r\\$1"
    assert split_secondary_index_key(key) == ("a$b\\c", "r$1")
    assert secondary_index_key(None, "r") == "\0$r"
    assert split_secondary_index_key("\0$r") == (None, "r")
    assert partition_identifier("") == "."


def test_routing_uses_java_string_hashes() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("TXN-001") == hash_java("TXN-001")
    assert java_string_hash("clé-€") == hash_java("clé-€")  # beyond ASCII: UTF-16 code units
    assert java_string_hash("\U0001d11e") == 31 * 0xD834 + 0xDD1E  # a surrogate pair: two units
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert MetadataPartition("record_index").file_group_of("polygenelubricants", 10) == 8
    assert MetadataPartition("secondary_index_x").file_id_prefix == "secondary-index-x-"
    assert MetadataPartition("secondary_index_x").file_group_id(3) == "secondary-index-x-0003-0"
    assert file_group_index("files-0012-0") == 12 and file_group_index("files-0012") == 12
    with pytest.raises(ValueError, match="not a metadata table partition"):
        _ = MetadataPartition("nonsense").kind


def hash_java(value: str) -> int:
    h = 0
    for c in value:
        h = (31 * h + ord(c)) % (1 << 32)
    return h - (1 << 32) if h >= (1 << 31) else h


def test_hash_ids_and_java_map_order() -> None:
    assert xxhash64(b"", 0) == 0xEF46DB3751D8E999  # the reference XXH64 of nothing
    assert xxhash64(b"a" * 100, 0) == xxhash64(b"a" * 100, 0)
    assert len(column_id("c")) == 12 and len(partition_id("p")) == 12 and len(file_id("f")) == 24
    assert java_hash_map_order(["region=apac", "region=us", "region=eu"]) == [
        "region=eu",
        "region=us",
        "region=apac",
    ]


def test_writers_of_tables_before_1x_follow_the_schema_their_files_carry() -> None:
    assert writer_schema(9, None) == METADATA_RECORD_1X
    assert writer_schema(6, "{}") == "{}"
    # a metadata table created on version 6: Hudi 1.x's schema without what 1.x added
    assert writer_schema(6, None) == METADATA_RECORD_0X


def test_reading_one_partition_never_touches_the_others(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    metadata = root / ".hoodie" / "metadata"
    for other in ("record_index", "column_stats", "partition_stats"):
        shutil.rmtree(metadata / other)
    reader = MetadataTableReader.open(Storage(str(root)))
    assert reader.partition_list() == ["region=apac", "region=eu", "region=us"]
    assert reader.files("region=us")
    assert reader.record_locations(["TXN-001"]) == {}
