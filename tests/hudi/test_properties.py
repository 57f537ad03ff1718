"""`hoodie.properties`: Java properties as Hudi writes them, our round trip and the checksum."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from tms.hudi.properties import (
    CHECKSUM,
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    parse_properties,
    table_checksum,
)
from tms.hudi.storage import Storage
from tms.testing.sample_writer.new_table import create_table

# As Hudi 0.14's `Properties.store` leaves it, plus what hand edits add: `!` comments, blank
# lines, `:` and whitespace separators, continuation lines, `\uXXXX` escapes.
REAL_PROPERTIES = r"""#Updated at 2024-05-14T09:12:44.371Z
#Tue May 14 09:12:44 UTC 2024
hoodie.table.precombine.field=ts
hoodie.datasource.write.drop.partition.columns=false
hoodie.table.partition.fields=city
hoodie.table.type=MERGE_ON_READ
hoodie.archivelog.folder=archived
hoodie.compaction.payload.class=org.apache.hudi.common.model.OverwriteWithLatestAvroPayload
hoodie.timeline.layout.version=1
hoodie.table.version=6
hoodie.table.metadata.partitions=
hoodie.table.recordkey.fields=uuid
hoodie.database.name=mmc_hudi
hoodie.datasource.write.partitionpath.urlencode=false
hoodie.table.name=tbx
hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator
hoodie.datasource.write.hive_style_partitioning=false
hoodie.table.checksum=1632286010
hoodie.table.create.schema={"type"\:"record","name"\:"tbx_record","namespace"\:"hoodie.tbx","fields"\:[{"name"\:"uuid","type"\:["string","null"]},{"name"\:"ts","type"\:["long","null"]}]}
hoodie.table.base.file.format=PARQUET

! a comment in the other style
   # an indented comment
hoodie.storage.path=hdfs\://ns1/user/warehouse/tbx
hoodie.bootstrap.index.class : org.apache.hudi.common.bootstrap.index.NoOpBootstrapIndex
hoodie.custom.owner    Jos\u00e9 Mar\u00eda
hoodie.custom.list=a,\
                   b,\
    c
hoodie.custom.equation=x\=1\:y\=2
hoodie.custom.backslash=C\:\\temp\\
hoodie.custom.empty
"""


def test_real_hoodie_properties_are_parsed() -> None:
    props = parse_properties(REAL_PROPERTIES)
    config = TableConfig(props)

    assert config.table_name == "tbx"
    assert config.table_type == "MERGE_ON_READ" and config.is_merge_on_read
    assert config.table_version == 6 and config.timeline_layout_version == 1
    assert config.timeline_path == ".hoodie"
    assert config.record_key_fields == ["uuid"]
    assert config.ordering_fields == ["ts"]
    assert config.partition_fields == ["city"]
    assert config.base_file_format == "PARQUET"
    assert config.metadata_partitions == []
    schema = json.loads(config.get("hoodie.table.create.schema"))
    assert [f["name"] for f in schema["fields"]] == ["uuid", "ts"]
    assert props["hoodie.storage.path"] == "hdfs://ns1/user/warehouse/tbx"
    assert props["hoodie.bootstrap.index.class"].endswith("NoOpBootstrapIndex")
    assert props["hoodie.custom.owner"] == "José María"
    assert props["hoodie.custom.list"] == "a,b,c"
    assert props["hoodie.custom.equation"] == "x=1:y=2"
    assert props["hoodie.custom.backslash"] == "C:\\temp\\"
    assert props["hoodie.custom.empty"] == ""
    assert not any(key.startswith(("#", "!")) for key in props)


def test_checksum_is_hudis_crc32_of_database_dot_table() -> None:
    # The pair above comes from a table Hudi wrote; Hudi refuses a hoodie.properties whose
    # checksum does not match, so ours must be computed the same way.
    assert table_checksum("tbx", "mmc_hudi") == 1632286010
    assert table_checksum("trips") == zlib.crc32(b".trips")


def test_save_round_trips_and_writes_the_checksum(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    original = parse_properties(REAL_PROPERTIES)
    awkward = {
        "hoodie.custom.spaces": "  leading and trailing  ",
        "hoodie.custom.specials": "#not a comment! a=b: c\\d",
        "hoodie.custom.lines": "one\ntwo\r\nthree\tfour\fform feed",
        "hoodie.custom.unicode": "café ☕ 😀 \u2028 line separator",
        "hoodie.custom key with spaces=and:separators": "v",
    }
    TableConfig({**original, **awkward}).save(storage)

    data = (tmp_path / PROPERTIES_PATH).read_bytes()
    data.decode("ascii")  # Java reads the file as ISO-8859-1: everything else is \u-escaped
    assert data.startswith(b"#")
    reloaded = TableConfig.load(storage)
    assert dict(reloaded.props) == {**original, **awkward}
    assert reloaded.get(CHECKSUM) == "1632286010"

    # Saving what was loaded changes nothing but the comment line.
    reloaded.save(storage)
    assert TableConfig.load(storage).props == reloaded.props


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_any_java_line_terminator(newline: str) -> None:
    text = newline.join(["# c", "a=1", "b = 2 \\", "  3", "c:\\u0041\u00a0"])
    assert parse_properties(text) == {"a": "1", "b": "2 3", "c": "A\u00a0"}


def test_properties_written_by_us_read_back_by_writer_tables(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts")
    text = (tmp_path / "t" / PROPERTIES_PATH).read_text("ascii")
    props = parse_properties(text)
    assert props[CHECKSUM] == str(table_checksum("trips", props.get("hoodie.database.name", "")))
    assert parse_properties(format_properties(props)) == props


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"hoodie.table.precombine.field": "ts"}, ["ts"]),  # version 6 and 8
        ({"hoodie.table.ordering.fields": "ts, seq"}, ["ts", "seq"]),  # version 9
        # a table upgraded to version 9 names its fields under the new key; it is the one read
        (
            {"hoodie.table.precombine.field": "ts", "hoodie.table.ordering.fields": "event_time"},
            ["event_time"],
        ),
        ({}, []),
    ],
)
def test_ordering_fields_under_either_spelling(props: dict[str, str], expected: list[str]) -> None:
    assert TableConfig(props).ordering_fields == expected
