"""Every table serviced: with the executor choice `auto`, compaction, clustering and clean
succeed on tables with the features tms's own executor declines, by Hudi's own code, and on
every real table of the fixtures. Each attempt runs in tms's job protocol inside Hudi's Spark
(`tests.hudi_java.hudi_jobs`); after each, Hudi's reader and hudi-rs read the rows the model
expects, the metadata table agrees with a listing as Hudi's classes see them
(`tests.hudi_java.metadata_check`), and Hudi's writer writes on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi_java.support import HUDI_1_2, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.hudi_java.user_classes import LARGEST_VALUE_PAYLOAD
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.table_refusals import unsupported_features

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
DAY = 86_400_000
"""A day in epoch milliseconds: the rows of the two partitions are ordered a day apart."""


@dataclass(frozen=True)
class Feature:
    """A table tms's own executor declines: how Hudi's writer makes it, and the words of
    the refusal."""

    name: str
    table_version: int
    table_type: str
    options: dict[str, str]
    declined: str
    hudi_rs_merges: bool = True
    """Whether hudi-rs reads the table's log files (it merges neither partial updates nor by a
    payload class)."""
    hudi_declines_clean: str | None = None
    """The words of Hudi's executor's refusal to clean the table, where it declines it too."""
    setup: str | None = None
    """A function of `tests.hudi_java.table_features` that gives the table its feature after
    the writes, called in Hudi's Spark with the table's path and the writer's options."""
    keeps: Callable[[Row, Row], Row] | None = None
    """Of a stored row and a new version of it, the one the table keeps (by its payload
    class); None: the new one."""


def larger_value(stored: Row, new: Row) -> Row:
    """`LARGEST_VALUE_PAYLOAD`: the version with the larger `val` (the last column)."""
    return stored if stored[-1] > new[-1] else new


FEATURES = [
    Feature(
        "partial_update_payload_v6",
        6,
        "MERGE_ON_READ",
        {
            "hoodie.datasource.write.payload.class": (
                "org.apache.hudi.common.model.PartialUpdateAvroPayload"
            )
        },
        "payload",
        hudi_rs_merges=False,
    ),
    Feature(
        "custom_merge_mode_v8",
        8,
        "MERGE_ON_READ",
        {
            "hoodie.datasource.write.payload.class": (
                "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload"
            )
        },
        "record merge mode CUSTOM",
        hudi_rs_merges=False,
    ),
    Feature(
        "expression_index_v9",
        9,
        "MERGE_ON_READ",
        {"hoodie.metadata.index.column.stats.enable": "true"},
        "expr_index_",
        hudi_declines_clean="Hudi 1.2's clean breaks a table with expression indexes",
        setup="create_expression_index",
    ),
    Feature(  # a class of the user's own: Hudi's code must merge by it, in every service
        "user_payload_class_v6",
        6,
        "MERGE_ON_READ",
        {"hoodie.datasource.write.payload.class": LARGEST_VALUE_PAYLOAD},
        LARGEST_VALUE_PAYLOAD,
        hudi_rs_merges=False,
        keeps=larger_value,
    ),
    Feature(  # a table Hudi's write client log-compacted: Hudi's code reads and serves it
        "partitioned_record_index_log_compacted_v9",
        9,
        "MERGE_ON_READ",
        {
            "hoodie.metadata.record.level.index.enable": "true",
            "hoodie.index.type": "RECORD_LEVEL_INDEX",
        },
        "a partitioned record index",
        setup="log_compact",
    ),
]


@dataclass
class Model:
    """The rows a table must read: key → row."""

    rows: dict[str, Row] = field(default_factory=dict)
    keeps: Callable[[Row, Row], Row] | None = None

    def apply(self, upserts: list[Row]) -> None:
        for row in upserts:
            stored = self.rows.get(row[0])
            keep = self.keeps if stored is not None else None
            self.rows[row[0]] = row if keep is None or stored is None else keep(stored, row)

    def sorted(self) -> list[Row]:
        return sorted(self.rows.values())


def writer_options(feature: Feature, path: Path) -> dict[str, str]:
    return {
        **keyed_table(path.name, feature.table_type),
        **HUDI_1_2.write_options(feature.table_version),
        "hoodie.parquet.small.file.limit": "0",  # each insert its own file groups: to cluster
        **feature.options,
    }


def rows(start: int, count: int, ts: int) -> list[Row]:
    return [(f"k{i}", ts + (i % 2) * DAY, f"p{i % 2}", float(i)) for i in range(start, count)]


def attempt(hudi: HudiSpark, path: Path, action: str, **fields: Any) -> dict[str, Any]:
    """One attempt with the choice `auto`; the figures of its SUCCEEDED result."""
    outcome = hudi.run(
        "tests.hudi_java.hudi_jobs:run_attempt",
        str(path),
        action,
        {"executor": "auto", **fields},
    )
    result = outcome["result"]
    assert outcome["code"] == 0 and result is not None, outcome
    assert result["outcome"] == "SUCCEEDED", result
    figures: dict[str, Any] = result["figures"]
    return figures


def check_reads(hudi: HudiSpark, path: Path, model: Model, feature: Feature) -> None:
    assert hudi.read(path, COLUMNS) == model.sorted()
    if feature.hudi_rs_merges or not _has_log_files(path):
        assert hudi_rs_rows(str(path)) == model.sorted()
    if HudiTable.open(str(path)).config.metadata_partitions:
        report = hudi.run("tests.hudi_java.metadata_check:compare", str(path))
        assert report["problems"] == [], report


def _has_log_files(path: Path) -> bool:
    slices = HudiTable.open(str(path)).file_system_view().latest_file_slices()
    return any(s.has_log_files for s in slices)


def refused(
    hudi: HudiSpark, path: Path, action: str, executor: str, *words: str, **fields: Any
) -> dict[str, Any]:
    """An attempt that fails, not to be retried, naming each of `words`, before anything is
    written: the timeline as it was. Its result."""
    before = HudiTable.open(str(path)).timeline().instants
    outcome = hudi.run(
        "tests.hudi_java.hudi_jobs:run_attempt", str(path), action, {"executor": executor, **fields}
    )
    result: dict[str, Any] = outcome["result"]
    assert result["outcome"] == "FAILED" and not result.get("retryable"), result
    assert all(word in result["error"] for word in words), result
    assert HudiTable.open(str(path)).timeline().instants == before
    return result


def refused_natively(hudi: HudiSpark, path: Path, feature: Feature) -> None:
    """Asked for `native`, each service refuses before anything is written: no plan left."""
    for action in ("compaction", "clustering", "clean"):
        result = refused(hudi, path, action, "native", feature.declined)
        assert result["figures"].get("executor") is None


EXTENDED_FEATURES = {"partial_update_payload_v6", "custom_merge_mode_v8"}
"""Declines whose path the default run's cases take too (a payload class tms does not merge:
the user's own class; a merge tms does not do: the partitioned record index); the extended
run has them."""


@pytest.mark.parametrize(
    "feature",
    [
        pytest.param(
            f, id=f.name, marks=pytest.mark.extended if f.name in EXTENDED_FEATURES else ()
        )
        for f in FEATURES
    ],
)
def test_auto_services_a_table_native_declines_with_hudis_code(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path, feature: Feature
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / feature.name
    options = writer_options(feature, path)
    model = Model(keeps=feature.keeps)
    ts = 1_700_000_000_000

    def write(batch: list[Row], operation: str) -> None:
        hudi.write(path, batch, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})
        model.apply(batch)

    write(rows(0, 4, ts), "insert")
    write(rows(4, 8, ts), "insert")
    write([(k, t + 1, p, v + 0.5) for k, t, p, v in rows(0, 3, ts)], "upsert")
    if feature.setup:
        hudi.run(f"tests.hudi_java.table_features:{feature.setup}", str(path), options)
    refusals = unsupported_features(HudiTable.open(str(path)))
    assert any(feature.declined in reason for reason in refusals), refusals
    check_reads(hudi, path, model, feature)
    refused_natively(hudi, path, feature)

    if feature.table_type == "MERGE_ON_READ":
        compacted = attempt(hudi, path, "compaction")
        assert compacted["executor"] == "hudi" and feature.declined in compacted["native_declined"]
        assert compacted["files_written"] > 0
        check_reads(hudi, path, model, feature)

    clustered = attempt(hudi, path, "clustering", extra_params={"small_file_limit": 1 << 30})
    assert clustered["executor"] == "hudi" and feature.declined in clustered["native_declined"]
    assert 0 < clustered["files_written"] < clustered["file_groups"]
    check_reads(hudi, path, model, feature)

    clean = {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 1}
    if feature.hudi_declines_clean:
        words = (feature.declined, feature.hudi_declines_clean)
        refused(hudi, path, "clean", "auto", *words, extra_params=clean)
    else:
        cleaned = attempt(hudi, path, "clean", extra_params=clean)
        assert cleaned["executor"] == "hudi"
        check_reads(hudi, path, model, feature)

    write([(k, t + 2, p, v + 0.25) for k, t, p, v in rows(2, 6, ts)], "upsert")
    check_reads(hudi, path, model, feature)
    timeline = HudiTable.open(str(path)).timeline()
    assert not timeline.pending((Action.COMPACTION, Action.CLUSTERING, Action.CLEAN))
    assert HudiTable.open(str(path)).config.table_version == feature.table_version


FIXTURES = [
    "cow_v8_nonpartitioned",
    "cow_v9_txns_simple_nometa",
    "cow_v9_txns_simple_meta",
    "mor_avro_v9_txns_simple_nometa",
    "mor_avro_v9_txns_simple_meta",
]


def snapshot_rows(hudi: HudiSpark, path: Path) -> tuple[list[Row], list[dict[str, Any]]]:
    """The table's rows through Hudi's reader and hudi-rs."""
    by_hudi_rs = oracle.snapshot(str(path))
    columns = [c for c in by_hudi_rs.column_names if not c.startswith("_hoodie")]
    return hudi.read(path, columns), by_hudi_rs.to_pylist()


@pytest.mark.parametrize("name", FIXTURES)
def test_auto_services_every_fixture_table(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path, name: str
) -> None:
    """A real Hudi table, its rows rewritten by Hudi's writer (new log files or file
    versions): each service runs with `auto`, and the rows read the same after each."""
    hudi = hudi_spark(HUDI_1_2)
    path = unzip_fixture(name, tmp_path)
    hudi.run("tests.hudi_java.hudi_jobs:rewrite_some", str(path), 3)
    hudi.run("tests.hudi_java.hudi_jobs:rewrite_some", str(path), 2)
    rows = snapshot_rows(hudi, path)
    table = HudiTable.open(str(path))
    expected = "hudi" if unsupported_features(table) else "native"
    actions = ["clustering", "clean"]
    if table.config.is_merge_on_read:
        actions.insert(0, "compaction")
    for action in actions:
        params = {
            "clustering": {"small_file_limit": 1 << 30},
            "clean": {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 1},
        }.get(action, {})
        figures = attempt(hudi, path, action, extra_params=params)
        assert figures["executor"] == expected, figures
        assert snapshot_rows(hudi, path) == rows, action
        if HudiTable.open(str(path)).config.metadata_partitions:
            report = hudi.run("tests.hudi_java.metadata_check:compare", str(path))
            assert report["problems"] == [], report
    hudi.run("tests.hudi_java.hudi_jobs:rewrite_some", str(path), 2)
    assert snapshot_rows(hudi, path) == rows


def test_auto_builds_a_version_6_files_partition_with_hudis_indexer(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path
) -> None:
    """A version 6 table written without a metadata table: tms's own build declines its
    `files` partition, so `auto` plans and runs it with Hudi's async indexer. The table then
    reads the same through Hudi's reader, hudi-rs and its new metadata table, which Hudi's
    writer keeps writing."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "no_metadata_v6"
    options = {
        **keyed_table(path.name, "MERGE_ON_READ"),
        **HUDI_1_2.write_options(6),
        "hoodie.metadata.enable": "false",
    }
    model = Model()
    ts = 1_700_000_000_000

    def write(batch: list[Row], operation: str, **extra: str) -> None:
        configs = {**options, "hoodie.datasource.write.operation": operation, **extra}
        hudi.write(path, batch, SCHEMA, configs)
        model.apply(batch)

    write(rows(0, 6, ts), "insert")
    write([(k, t + 1, p, v + 0.5) for k, t, p, v in rows(0, 3, ts)], "upsert")
    assert HudiTable.open(str(path)).config.metadata_partitions == []

    native = hudi.run(
        "tests.hudi_java.hudi_jobs:run_attempt",
        str(path),
        "indexing",
        {"executor": "native", "extra_params": {"partitions": "files"}},
    )["result"]
    assert native["outcome"] == "FAILED" and "table version 6" in native["error"], native
    assert not HudiTable.open(str(path)).timeline().pending((Action.INDEXING,))

    built = attempt(hudi, path, "indexing", extra_params={"partitions": "files"})
    assert built["executor"] == "hudi" and "table version 6" in built["native_declined"]
    assert built["file_groups"] >= 1
    table = HudiTable.open(str(path))
    assert table.config.metadata_partitions == ["files"]
    assert table.config.table_version == 6
    assert len(table.timeline().completed((Action.INDEXING,))) == 1
    check_reads(hudi, path, model, Feature("files_v6", 6, "MERGE_ON_READ", {}, ""))

    write([(k, t + 2, p, v + 0.25) for k, t, p, v in rows(2, 5, ts)], "upsert", **{
        "hoodie.metadata.enable": "true"
    })  # fmt: skip
    check_reads(hudi, path, model, Feature("files_v6", 6, "MERGE_ON_READ", {}, ""))
    assert HudiTable.open(str(path)).config.table_version == 6
