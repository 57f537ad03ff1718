"""How records of a table merge, from its properties as Hudi 0.x and 1.x write them; refusals."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
from tests.hudi.test_fixture_views import FIXTURES, WITH_METADATA_TABLE, WITHOUT_METADATA_TABLE
from tests.hudi.test_unsupported import listing, set_properties
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.merge import DeleteVersion, latest_by_key, merge_versions
from tms.hudi.merge_config import MergeMode, merge_refusals, record_merging
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.properties import TableConfig, parse_properties
from tms.hudi.table import HudiTable
from tms.services.table_refusals import unsupported_features
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

MODEL = "org.apache.hudi.common.model."
EVENT_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
PAYLOAD_BASED_ID = "00000000-0000-0000-0000-000000000000"
EVENT, COMMIT = MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING

# (table version, properties) -> (merge mode, fields merging compares)
HONOURED: dict[str, tuple[int, dict[str, str], MergeMode, tuple[str, ...]]] = {
    "v6-default-payload": (
        6,
        {
            "hoodie.compaction.payload.class": MODEL + "DefaultHoodieRecordPayload",
            "hoodie.table.precombine.field": "ts",
        },
        EVENT,
        ("ts",),
    ),
    "v6-overwrite-payload": (
        6,
        {
            "hoodie.compaction.payload.class": MODEL + "OverwriteWithLatestAvroPayload",
            "hoodie.table.precombine.field": "ts",
        },
        COMMIT,
        (),
    ),
    "v6-event-time-payload": (
        6,
        {"hoodie.compaction.payload.class": MODEL + "EventTimeAvroPayload"},
        EVENT,
        (),
    ),
    "v6-nothing-set-with-ordering": (6, {"hoodie.table.precombine.field": "ts"}, EVENT, ("ts",)),
    "v6-nothing-set": (6, {}, COMMIT, ()),
    "v6-several-ordering-fields": (
        6,
        {
            "hoodie.compaction.payload.class": MODEL + "DefaultHoodieRecordPayload",
            "hoodie.table.precombine.field": "ts, seq",
        },
        EVENT,
        ("ts", "seq"),
    ),
    "v8-event-time": (
        8,
        {
            "hoodie.compaction.payload.class": MODEL + "DefaultHoodieRecordPayload",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": EVENT_ID,
            "hoodie.table.precombine.field": "ts",
        },
        EVENT,
        ("ts",),
    ),
    "v8-commit-time": (
        8,
        {
            "hoodie.compaction.payload.class": MODEL + "OverwriteWithLatestAvroPayload",
            "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": COMMIT_ID,
            "hoodie.table.precombine.field": "ts",
        },
        COMMIT,
        (),
    ),
    "v9-event-time": (
        9,
        {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts"},
        EVENT,
        ("ts",),
    ),
    "v9-several-ordering-fields": (
        9,
        {
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.table.ordering.fields": "ts,seq",
        },
        EVENT,
        ("ts", "seq"),
    ),
    "v9-commit-time": (
        9,
        {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts"},
        COMMIT,
        (),
    ),
    "v9-legacy-default-payload": (
        9,
        {
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": EVENT_ID,
            "hoodie.table.legacy.payload.class": MODEL + "DefaultHoodieRecordPayload",
            "hoodie.table.ordering.fields": "ts",
        },
        EVENT,
        ("ts",),
    ),
    "v9-event-time-without-ordering": (
        9,
        {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING"},
        EVENT,
        (),
    ),
}

# (table version, properties) -> words the reason must contain
REFUSED: dict[str, tuple[int, dict[str, str], str]] = {
    "v9-custom-mode": (
        9,
        {"hoodie.record.merge.mode": "CUSTOM", "hoodie.record.merge.strategy.id": "my-merger"},
        "CUSTOM",
    ),
    "v8-custom-payload": (
        8,
        {
            "hoodie.compaction.payload.class": "com.example.MyPayload",
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.record.merge.strategy.id": PAYLOAD_BASED_ID,
        },
        "com.example.MyPayload",
    ),
    "v6-custom-payload": (
        6,
        {"hoodie.compaction.payload.class": "com.example.MyPayload"},
        "com.example.MyPayload",
    ),
    "v6-partial-update-payload": (
        6,
        {"hoodie.compaction.payload.class": MODEL + "PartialUpdateAvroPayload"},
        "PartialUpdateAvroPayload",
    ),
    "v6-overwrite-non-defaults-payload": (
        6,
        {"hoodie.compaction.payload.class": MODEL + "OverwriteNonDefaultsWithLatestAvroPayload"},
        "OverwriteNonDefaultsWithLatestAvroPayload",
    ),
    "v9-legacy-partial-update-payload": (
        9,
        {
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": EVENT_ID,
            "hoodie.table.legacy.payload.class": MODEL + "PartialUpdateAvroPayload",
            "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS",
            "hoodie.table.ordering.fields": "ts",
        },
        "partial updates",
    ),
    "v9-partial-update-mode": (
        9,
        {
            "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
            "hoodie.table.partial.update.mode": "IGNORE_MARKERS",
        },
        "hoodie.table.partial.update.mode=IGNORE_MARKERS",
    ),
    "v9-delete-markers": (
        9,
        {
            "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
            "hoodie.record.merge.property.hoodie.payload.delete.field": "Op",
        },
        "hoodie.record.merge.property.hoodie.payload.delete.field",
    ),
    "v8-mode-against-strategy": (
        8,
        {
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": COMMIT_ID,
        },
        "disagrees",
    ),
    "v9-unknown-mode": (9, {"hoodie.record.merge.mode": "LATEST"}, "'LATEST'"),
}


def config(version: int, props: dict[str, str]) -> TableConfig:
    return TableConfig({"hoodie.table.version": str(version), **props})


@pytest.mark.parametrize("case", sorted(HONOURED))
def test_merge_mode_and_ordering_fields_as_hudi_infers_them(case: str) -> None:
    version, props, mode, compared = HONOURED[case]
    merging = record_merging(config(version, props))
    assert (merging.mode, merging.compared_fields) == (mode, compared)
    assert merge_refusals(config(version, props)) == []


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_merging_we_cannot_reproduce_is_refused_with_the_reason(case: str) -> None:
    version, props, words = REFUSED[case]
    with pytest.raises(UnsupportedTableError, match=words.replace(".", r"\.")):
        record_merging(config(version, props))
    assert any(words in reason for reason in merge_refusals(config(version, props)))


@pytest.mark.parametrize("name", WITHOUT_METADATA_TABLE + WITH_METADATA_TABLE)
def test_fixture_tables_merge_by_event_time_on_their_ordering_field(name: str) -> None:
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as archive:
        (member,) = [
            m
            for m in archive.namelist()
            if m.endswith(".hoodie/hoodie.properties") and "/metadata/" not in m
        ]
        props = parse_properties(archive.read(member).decode("iso-8859-1"))
    merging = record_merging(TableConfig(props))
    expected = "longField" if name == "cow_v8_nonpartitioned" else "txn_ts"
    assert (merging.mode, merging.compared_fields) == (EVENT, (expected,))


def rows(keys: list[str], ts: list[int], seq: list[int] | None = None) -> pa.Table:
    columns: dict[str, list[object]] = {RECORD_KEY: list(keys), "ts": list(ts)}
    if seq is not None:
        columns["seq"] = list(seq)
    columns["v"] = list(range(len(keys)))
    return pa.table(columns)


def winners(table: pa.Table) -> dict[str, int]:
    return dict(
        zip(table.column(RECORD_KEY).to_pylist(), table.column("v").to_pylist(), strict=True)
    )


def test_commit_time_ordering_keeps_the_later_write_whatever_its_ordering_value() -> None:
    data = rows(["a", "a", "b", "b"], [9, 1, 1, 9])
    assert winners(latest_by_key(data, ())) == {"a": 1, "b": 3}
    assert winners(latest_by_key(data, ("ts",))) == {"a": 0, "b": 3}


def test_commit_time_ordering_lets_a_later_delete_win_over_a_higher_ordering_value() -> None:
    data = rows(["a", "b"], [9, 9])
    deletes = [DeleteVersion("a", 5, 1), DeleteVersion("b", 5, 1)]
    assert winners(merge_versions(data, [0, 0], deletes, ())) == {}
    assert winners(merge_versions(data, [0, 0], deletes, ("ts",))) == {"a": 0, "b": 1}


def test_several_ordering_fields_compare_as_a_tuple() -> None:
    # key a: (2, 1) beats the later (1, 9); key b: a tie on ts is settled by seq
    # key c: equal tuples go to the later write
    data = rows(["a", "a", "b", "b", "c", "c"], [2, 1, 5, 5, 3, 3], seq=[1, 9, 7, 2, 4, 4])
    assert winners(latest_by_key(data, ("ts", "seq"))) == {"a": 0, "b": 2, "c": 5}
    assert winners(latest_by_key(data, ("ts",))) == {"a": 0, "b": 3, "c": 5}


def test_several_ordering_fields_decide_between_records_and_deletes() -> None:
    data = rows(["a", "a", "b"], [5, 5, 5], seq=[3, 1, 1])
    # a: (5, 3) at position 0 beats (5, 1) at position 1; the delete of b at ts 4 is too old
    merged = merge_versions(data, [0, 1, 0], [DeleteVersion("b", 4, 2)], ("ts", "seq"))
    assert winners(merged) == {"a": 0, "b": 2}
    merged = merge_versions(data, [0, 1, 0], [DeleteVersion("b", 6, 2)], ("ts", "seq"))
    assert winners(merged) == {"a": 0}


_KEYGEN = "org.apache.hudi.keygen."


def v6_table(tmp_path: Path, props: dict[str, str]) -> str:
    base = str(tmp_path / "t")
    table = create_table(base, "t", record_key_fields=["id"], ordering_field="ts")
    writer = HudiWriter(table, max_file_rows=40)
    keys = pa.array([f"k{i}" for i in range(10)])
    writer.insert(pa.table({"id": keys, "ts": pa.array([1] * 10, pa.int64())}))
    writer.upsert(pa.table({"id": keys[:4], "ts": pa.array([2] * 4, pa.int64())}))
    assert unsupported_features(HudiTable.open(base)) == []
    set_properties(base, **props)
    return base


@pytest.mark.parametrize("service", ["compaction", "clustering", "clean"])
@pytest.mark.parametrize(
    "case", ["v6-custom-payload", "v6-partial-update-payload", "v6-overwrite-non-defaults-payload"]
)
def test_tms_run_refuses_merging_it_cannot_reproduce_and_writes_nothing(
    tmp_path: Path, case: str, service: str
) -> None:
    _version, props, words = REFUSED[case]
    base = v6_table(tmp_path, props)
    before = listing(base)

    result = CliRunner().invoke(app, ["run", service, "--base-path", base, "--executor", "native"])

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert words in lines[0]
    assert "Traceback" not in result.output
    assert listing(base) == before


def test_tms_run_refuses_a_custom_merge_mode(tmp_path: Path) -> None:
    base = v6_table(tmp_path, {"hoodie.record.merge.mode": "CUSTOM"})
    before = listing(base)

    result = CliRunner().invoke(
        app, ["run", "compaction", "--base-path", base, "--executor", "native"]
    )

    assert result.exit_code == 2, result.output
    assert "CUSTOM" in result.stderr and "EVENT_TIME_ORDERING" in result.stderr
    assert listing(base) == before


@pytest.mark.parametrize(
    ("props", "words"),
    [
        (
            {"hoodie.table.keygenerator.class": "com.example.UserKeyGenerator"},
            "com.example.UserKeyGenerator is not handled",
        ),
        (
            {
                "hoodie.table.keygenerator.class": _KEYGEN + "TimestampBasedKeyGenerator",
                "hoodie.table.recordkey.fields": "id,ts",
            },
            "TIMESTAMP key generator with record key fields ['id', 'ts']: needs exactly one",
        ),
        (
            {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"},
            "COMPLEX key generator with a single record key field",
        ),
    ],
)
def test_tms_run_refuses_virtual_keys_it_cannot_compute_saying_why(
    tmp_path: Path, props: dict[str, str], words: str
) -> None:
    base = v6_table(tmp_path, {"hoodie.populate.meta.fields": "false", **props})
    before = listing(base)

    result = CliRunner().invoke(
        app, ["run", "compaction", "--base-path", base, "--executor", "native"]
    )

    assert result.exit_code == 2, result.output
    assert "hoodie.populate.meta.fields=false" in result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.output
    assert listing(base) == before


@pytest.mark.parametrize(
    "props",
    [
        {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"},
        {"hoodie.table.keygenerator.type": "NON_PARTITION"},
        {},
    ],
)
def test_virtual_keys_of_simple_and_non_partitioned_key_generators_are_accepted(
    tmp_path: Path, props: dict[str, str]
) -> None:
    base = v6_table(tmp_path, {"hoodie.populate.meta.fields": "false", **props})
    assert unsupported_features(HudiTable.open(base)) == []


@pytest.mark.parametrize(
    "props",
    [
        {
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        },
        {"hoodie.table.keygenerator.type": "TIMESTAMP"},
        {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator"},
    ],
)
def test_any_key_generator_is_accepted_while_keys_are_stored(
    tmp_path: Path, props: dict[str, str]
) -> None:
    """Services read `_hoodie_record_key` and `_hoodie_partition_path` as written; the key
    generator only matters when meta fields are not populated."""
    base = v6_table(tmp_path, props)
    assert unsupported_features(HudiTable.open(base)) == []


def test_a_missing_ordering_value_decides_alike_with_and_without_deletes() -> None:
    data = pa.table(
        {
            RECORD_KEY: ["a", "a"],
            "ts": pa.array([5, 5], pa.int64()),
            "seq": pa.array([None, 3], pa.int64()),
            "v": [0, 1],
        }
    )
    without_deletes = winners(latest_by_key(data, ("ts", "seq")))
    with_an_old_delete = winners(
        merge_versions(data, [1, 2], [DeleteVersion("a", 1, 0)], ("ts", "seq"))
    )
    assert without_deletes == with_an_old_delete == {"a": 0}
