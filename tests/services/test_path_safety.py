"""Crafted plans and markers naming paths outside the table are refused before anything moves.

Each test builds a real table with the project's writer next to sibling folders (`victim/`,
`abs/`) and a symlink `trips/link -> victim`, writes a plan (or markers) that names a path
outside the table, and checks that the service refuses it with a message naming the plan and
the path, while nothing under the test's folder changes: not the siblings, not one file of
the table, not its timeline.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tests.jobs.test_runner import FakeSpark
from tms.cli import app
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import UnsafePathError
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.jobs.client import JobClient
from tms.jobs.runner import EXIT_FAILED, JobRunner
from tms.services.clean.execute import execute_clean
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.rollback import rollback_inflight
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CITIES = ("sf", "nyc", "la")


@dataclass(frozen=True)
class Scene:
    root: Path
    """The test's folder: the table and its siblings."""
    base: Path
    victim: Path
    abs_dir: Path

    @property
    def table(self) -> HudiTable:
        return HudiTable.open(str(self.base))

    def sf_files(self) -> list[str]:
        return sorted(p.name for p in (self.base / "sf").iterdir() if not p.name.startswith(".h"))


def batch(ids: range, ts: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([f"k{i:03d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([CITIES[i % 3] for i in ids]),
            "fare": pa.array([float(i) for i in ids]),
        }
    )


@pytest.fixture
def scene(tmp_path: Path, table_version: int) -> Scene:
    """A merge-on-read table, two file groups per partition with log files, and siblings."""
    base = tmp_path / "trips"
    table = create_table(
        str(base),
        "trips",
        table_type=MERGE_ON_READ,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=5)
    writer.insert(batch(range(30), ts=1))
    writer.upsert(batch(range(0, 30, 2), ts=2))
    victim, abs_dir = tmp_path / "victim", tmp_path / "abs"
    victim.mkdir()
    (victim / "secret.txt").write_text("secret")
    abs_dir.mkdir()
    (abs_dir / "abs.txt").write_text("abs")
    (base / "link").symlink_to(victim, target_is_directory=True)
    return Scene(tmp_path, base, victim, abs_dir)


def tree(root: Path) -> dict[str, str]:
    """Every entry below `root`: a file's SHA-256, a symlink's target, a folder as such."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def assert_refused_untouched(
    scene: Scene, run: Callable[[], object], bad: str, source: str
) -> UnsafePathError:
    """`run` raises UnsafePathError naming `bad` and `source`; nothing on disk changed."""
    siblings = {d: tree(scene.root / d) for d in ("victim", "abs")}
    table_before = tree(scene.base)
    timeline_before = scene.table.timeline().describe()
    with pytest.raises(UnsafePathError) as caught:
        run()
    message = str(caught.value)
    assert message.startswith(source) and repr(bad) in message, message
    assert {d: tree(scene.root / d) for d in ("victim", "abs")} == siblings
    assert (scene.victim / "secret.txt").read_text() == "secret"
    assert tree(scene.base) == table_before
    assert scene.table.timeline().describe() == timeline_before
    return caught.value


# Clean ----------------------------------------------------------------------------------------


def clean_cases(scene: Scene) -> dict[str, tuple[dict[str, Any], str]]:
    """Plans (version 2 by path, version 1 by name) and the path each must be refused for."""
    real = scene.sf_files()[0]
    victim, abs_dir, base = scene.victim, scene.abs_dir, scene.base

    def v2(partition: str, *paths: str) -> dict[str, Any]:
        infos = [{"filePath": p, "isBootstrapBaseFile": False} for p in paths]
        return {"version": 2, "filePathsToBeDeletedPerPartition": {partition: infos}}

    def v1(partition: str, *names: str) -> dict[str, Any]:
        return {"version": 1, "filesToBeDeletedPerPartition": {partition: list(names)}}

    return {
        "dotdot-partition": (v2("../victim", f"file:{base}/../victim/secret.txt"), "../victim"),
        "absolute-partition": (v2(str(abs_dir), f"file:{abs_dir}/abs.txt"), str(abs_dir)),
        "dotdot-partition-v1": (v1("../victim", "secret.txt"), "../victim"),
        "absolute-partition-v1": (v1(str(abs_dir), "abs.txt"), str(abs_dir)),
        "file-outside": (v2("sf", f"file:{victim}/secret.txt"), f"file:{victim}/secret.txt"),
        "other-bucket": (
            v2("sf", f"s3://other-bucket/trips/sf/{real}"),
            f"s3://other-bucket/trips/sf/{real}",
        ),
        "other-host": (
            v2("sf", f"hdfs://namenode{base}/sf/{real}"),
            f"hdfs://namenode{base}/sf/{real}",
        ),
        "symlink-out-v1": (v1("link", "secret.txt"), "link"),
        "hoodie-v1": (v1(".hoodie", "hoodie.properties"), ".hoodie"),
        "dotdot-name-v1": (v1("sf", "../../victim/secret.txt"), "../../victim/secret.txt"),
    }


CLEAN_CASES = [
    "dotdot-partition",
    "absolute-partition",
    "dotdot-partition-v1",
    "absolute-partition-v1",
    "file-outside",
    "other-bucket",
    "other-host",
    "symlink-out-v1",
    "hoodie-v1",
    "dotdot-name-v1",
]


def request_clean(scene: Scene, plan: dict[str, Any]) -> str:
    table = scene.table
    instant = new_instant_time(table.timeline().instants)
    plan = {"policy": "KEEP_LATEST_FILE_VERSIONS", **plan}
    content = avro_codec.encode("HoodieCleanerPlan", plan)
    request(table.storage, table.config, instant, Action.CLEAN, content)
    return instant


@pytest.mark.spark
@pytest.mark.parametrize("case", CLEAN_CASES)
def test_clean_refuses_a_plan_naming_files_outside_the_table(
    spark: Any, scene: Scene, case: str
) -> None:
    plan, bad = clean_cases(scene)[case]
    instant = request_clean(scene, plan)
    assert_refused_untouched(
        scene,
        lambda: execute_clean(spark, scene.table, instant),
        bad,
        f"clean plan {instant}",
    )


@pytest.mark.spark
def test_clean_refuses_when_one_partition_of_many_is_bad(spark: Any, scene: Scene) -> None:
    """All paths are checked before the first delete, wherever the bad one sits."""
    sf = scene.sf_files()
    plan = {
        "version": 2,
        "filePathsToBeDeletedPerPartition": {
            "sf": [{"filePath": f"{scene.base}/sf/{sf[0]}", "isBootstrapBaseFile": False}],
            "zz/../../victim": [{"filePath": "secret.txt", "isBootstrapBaseFile": False}],
        },
    }
    instant = request_clean(scene, plan)
    assert_refused_untouched(
        scene,
        lambda: execute_clean(spark, scene.table, instant),
        "zz/../../victim",
        f"clean plan {instant}",
    )


@pytest.mark.spark
def test_tms_run_clean_exits_2_naming_the_path(spark: Any, scene: Scene) -> None:
    instant = request_clean(
        scene, {"version": 1, "filesToBeDeletedPerPartition": {"../victim": ["secret.txt"]}}
    )
    args = ["run", "clean", "--base-path", str(scene.base), "--instant", instant]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"clean plan {instant}: '../victim'" in result.output
    assert (scene.victim / "secret.txt").read_text() == "secret"


def test_a_job_reports_the_refusal_as_a_failure_no_retry_can_fix(scene: Scene) -> None:
    """Refused before Spark does anything, so a stand-in session is enough."""
    instant = request_clean(
        scene, {"version": 1, "filesToBeDeletedPerPartition": {"../victim": ["secret.txt"]}}
    )
    spec = spec_json(base_path=str(scene.base), action="clean", instant=instant)
    routes = {
        "GET /spec": [(200, spec)],
        "POST /heartbeat": [OK_BEAT],
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }
    with stub_api(routes) as api, JobClient(api.url, 5, "tok", sleep=lambda _: None) as client:
        code = JobRunner(client, spark_factory=lambda spec, instant: FakeSpark()).run()
        (result,) = api.calls("POST /result")
    assert code == EXIT_FAILED
    assert result["outcome"] == "FAILED" and result["retryable"] is False
    assert result["error"].startswith(f"UnsafePathError: clean plan {instant}: '../victim'")
    assert (scene.victim / "secret.txt").read_text() == "secret"


# Compaction -----------------------------------------------------------------------------------


def rewrite_plan(
    scene: Scene, instant: str, schema: str, change: Callable[[dict[str, Any]], str]
) -> str:
    """Rewrite a scheduled plan's requested file with one field crafted; returns the path
    the crafted field holds."""
    table = scene.table
    timeline = table.timeline()
    pending = timeline.get(instant)
    assert pending is not None
    plan = timeline.avro_details(pending, State.REQUESTED)
    assert plan is not None
    bad = change(plan)
    path = timeline.instant_path(pending, State.REQUESTED)
    table.storage.write_bytes(path, avro_codec.encode(schema, plan))
    return bad


def sf_operation(plan: dict[str, Any]) -> dict[str, Any]:
    return next(op for op in plan["operations"] if op["partitionPath"] == "sf")


Change = Callable[[dict[str, Any]], str]
"""Crafts one field of a plan entry; returns the path the service must refuse."""


def setter(key: str, value: Any, bad: str | None = None) -> Change:
    def change(entry: dict[str, Any]) -> str:
        entry[key] = value
        return value if bad is None else bad

    return change


def compaction_cases(scene: Scene) -> dict[str, Change]:
    victim, abs_dir = scene.victim, scene.abs_dir

    def log_in_other_bucket(op: dict[str, Any]) -> str:
        op["deltaFilePaths"] = [f"s3://other-bucket/trips/sf/{op['deltaFilePaths'][0]}"]
        return str(op["deltaFilePaths"][0])

    return {
        "dotdot-partition": setter("partitionPath", "../victim"),
        "absolute-partition": setter("partitionPath", str(abs_dir)),
        "hoodie-partition": setter("partitionPath", ".hoodie"),
        "symlink-partition": setter("partitionPath", "link"),
        "dotdot-file-id": setter("fileId", "../../victim/evil"),
        "base-file-outside": setter("dataFilePath", f"file:{victim}/secret.txt"),
        "log-file-other-bucket": log_in_other_bucket,
        "log-file-dotdot": setter(
            "deltaFilePaths", ["../../victim/secret.txt"], "../../victim/secret.txt"
        ),
    }


@pytest.mark.spark
@pytest.mark.parametrize(
    "case",
    [
        "dotdot-partition",
        "absolute-partition",
        "hoodie-partition",
        "symlink-partition",
        "dotdot-file-id",
        "base-file-outside",
        "log-file-other-bucket",
        "log-file-dotdot",
    ],
)
def test_compaction_refuses_a_plan_naming_paths_outside_the_table(
    spark: Any, scene: Scene, case: str
) -> None:
    instant = schedule_compaction(scene.table)
    assert instant is not None
    bad = rewrite_plan(
        scene,
        instant,
        "HoodieCompactionPlan",
        lambda plan: compaction_cases(scene)[case](sf_operation(plan)),
    )
    assert_refused_untouched(
        scene,
        lambda: execute_compaction(spark, scene.table, instant),
        bad,
        f"compaction plan {instant}",
    )


# Clustering -----------------------------------------------------------------------------------


def clustering_cases(scene: Scene) -> dict[str, Change]:
    victim, abs_dir, base = scene.victim, scene.abs_dir, scene.base
    other_bucket = "s3://other-bucket/trips/sf/x_0-1-0_20250101000000000.parquet"
    other_host = f"hdfs://namenode{base}/sf/.x_20250101000000000.log.1_0-1-0"
    return {
        "dotdot-partition": setter("partitionPath", "../victim"),
        "absolute-partition": setter("partitionPath", str(abs_dir)),
        "symlink-partition": setter("partitionPath", "link"),
        "hoodie-partition": setter("partitionPath", ".hoodie/.aux"),
        "base-file-outside": setter("dataFilePath", f"file:{victim}/secret.txt"),
        "base-file-other-bucket": setter("dataFilePath", other_bucket),
        "log-file-other-host": setter("deltaFilePaths", [other_host], other_host),
        "dotdot-file-id": setter("fileId", "../x"),
    }


def sf_slice(plan: dict[str, Any]) -> dict[str, Any]:
    groups = plan["clusteringPlan"]["inputGroups"]
    return next(s for g in groups for s in g["slices"] if s["partitionPath"] == "sf")


@pytest.mark.spark
@pytest.mark.parametrize(
    "case",
    [
        "dotdot-partition",
        "absolute-partition",
        "symlink-partition",
        "hoodie-partition",
        "base-file-outside",
        "base-file-other-bucket",
        "log-file-other-host",
        "dotdot-file-id",
    ],
)
def test_clustering_refuses_a_plan_naming_paths_outside_the_table(
    spark: Any, scene: Scene, case: str
) -> None:
    instant = schedule_clustering(scene.table, small_file_limit=1 << 30)
    assert instant is not None
    bad = rewrite_plan(
        scene,
        instant,
        "HoodieRequestedReplaceMetadata",
        lambda plan: clustering_cases(scene)[case](sf_slice(plan)),
    )
    assert_refused_untouched(
        scene,
        lambda: execute_clustering(spark, scene.table, instant),
        bad,
        f"clustering plan {instant}",
    )


# Rollback from markers ------------------------------------------------------------------------


MARKER_CASES = {
    "hoodie": (
        Marker(".hoodie", "hoodie.properties", MarkerType.CREATE),
        ".hoodie/hoodie.properties",
    ),
    "symlink-out": (Marker("link", "secret.txt", MarkerType.MERGE), "link/secret.txt"),
}


def crashed(scene: Scene, service: str, marker: Marker) -> Instant:
    """A plan left inflight by a crash (no heartbeat), with a good marker and a crafted one."""
    table = scene.table
    if service == "compaction":
        instant = schedule_compaction(table)
    else:
        instant = schedule_clustering(table, small_file_limit=1 << 30)
    assert instant is not None
    pending = table.timeline().get(instant)
    assert pending is not None
    inflight = transition(table.storage, table.config, pending, State.INFLIGHT)
    good = Marker("sf", f"new-0_0-1-0_{instant}.parquet", MarkerType.CREATE)
    create_marker(table.storage, instant, good)
    create_marker(table.storage, instant, marker)
    return inflight


@pytest.mark.spark
@pytest.mark.parametrize("service", ["compaction", "clustering"])
@pytest.mark.parametrize("case", sorted(MARKER_CASES))
def test_rollback_refuses_markers_naming_files_outside_the_table(
    spark: Any, scene: Scene, service: str, case: str
) -> None:
    marker, bad = MARKER_CASES[case]
    inflight = crashed(scene, service, marker)
    ts = inflight.requested_time
    source = f"markers of instant {ts}"
    assert_refused_untouched(scene, lambda: rollback_inflight(scene.table, inflight), bad, source)
    execute = execute_compaction if service == "compaction" else execute_clustering
    assert_refused_untouched(scene, lambda: execute(spark, scene.table, ts), bad, source)
