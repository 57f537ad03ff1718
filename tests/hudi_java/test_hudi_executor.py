"""Hudi's own table-service code as tms's second executor, in tms's job protocol: a real
spark-submit job (the command line the service's engine builds, Hudi's bundle on it) fetches
its spec from a stub of the job API, plans or runs with the executor the spec names, beats and
reports. Plans cross over: a plan tms's planner wrote is run by Hudi's code, a plan Hudi's
procedure scheduled is run by tms's own executor, on table versions 6 and 9. And the executors
agree: the same compaction and clustering plan, run by each on a copy of the table, leaves
the same rows through Hudi's reader and hudi-rs, the same file groups, and metadata tables that
agree with their listings as Hudi's classes see them (`tests.hudi_java.metadata_check`). A
cancel while Hudi's code compacts stops it, and its plan runs again."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi_java.support import HUDI_1_2, HudiSpark, fetch, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import (
    COLUMNS,
    SCHEMA,
    expected_rows,
    hudi_rs_rows,
    write_table,
)
from tests.jobs.stub_api import OK_BEAT, StubApi, spec_json, stub_api
from tms.engines.base import LaunchSpec
from tms.engines.spark_submit import SubmitOptions, build_argv, build_env, spark_home
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.jobs.runner import EXIT_OK
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.spark_runtime import ensure_java
from tms.spark_runtime.hudi_bundle import hudi_spark_conf

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
JOB_TIMEOUT = 600.0


def run_job(api: StubApi, log: Path) -> int:
    """The attempt as the service's spark-submit engine launches it, with Hudi's bundle."""
    launch = LaunchSpec(3, 5, "job", api.url, "tok", log)
    home = spark_home(None)
    options = SubmitOptions(
        str(home / "bin" / "spark-submit"),
        "local[2]",
        hudi_conf=hudi_spark_conf([str(fetch(HUDI_1_2))]),
    )
    ensure_java()
    env = build_env(launch, home=home, environ=os.environ)
    with log.open("w") as out:
        done = subprocess.run(
            build_argv(launch, options), env=env, stdout=out, stderr=out, timeout=JOB_TIMEOUT
        )
    return done.returncode


def job(api_spec: dict[str, Any], log: Path) -> dict[str, Any]:
    """Run one attempt; the result it reported (`POST …/result`)."""
    routes = {
        "GET /spec": [(200, api_spec)],
        "POST /heartbeat": [OK_BEAT],
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }
    with stub_api(routes) as api:
        code = run_job(api, log)
    results = api.calls("POST /result")
    assert code == EXIT_OK and len(results) == 1, log.read_text()[-4000:]
    result: dict[str, Any] = results[0]
    return result


def reads(hudi: HudiSpark, path: Path) -> tuple[list[Row], list[Row]]:
    return hudi.read(path, COLUMNS), hudi_rs_rows(str(path))


def schedule_with_hudi(spark: Any, path: str) -> list[str]:
    """Hudi's own procedure schedules a compaction (run in Hudi's Spark, the child)."""
    spark.conf.set("hoodie.compact.inline.max.delta.commits", "1")
    rows = spark.sql(f"CALL run_compaction(op => 'schedule', path => '{path}')").collect()
    return [row.timestamp for row in rows]


def in_child(hudi: HudiSpark, path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One attempt inside Hudi's Spark (`tests.hudi_java.hudi_jobs`); its result."""
    fields = {k: v for k, v in spec.items() if k not in ("base_path", "action")}
    outcome = hudi.run("tests.hudi_java.hudi_jobs:run_attempt", str(path), spec["action"], fields)
    assert outcome["code"] == EXIT_OK and outcome["result"] is not None, outcome
    result: dict[str, Any] = outcome["result"]
    return result


def slices(path: Path) -> list[tuple[str, str, str, int]]:
    """Latest file slices as hudi-rs sees them: partition, file group, base instant, logs."""
    return [
        (s["partition"], s["file_id"], s["base_instant"], len(s["log_files"]))
        for s in oracle.file_slices(str(path))
    ]


def metadata_agrees(hudi: HudiSpark, path: Path) -> None:
    report = hudi.run("tests.hudi_java.metadata_check:compare", str(path))
    assert report["problems"] == [], report


def agree(hudi: HudiSpark, by_hudi: Path, by_native: Path) -> None:
    """Two copies of a table, one serviced by each executor, read alike: the same rows
    through Hudi's reader and hudi-rs, and metadata tables that agree with their listings."""
    assert reads(hudi, by_hudi) == reads(hudi, by_native)
    metadata_agrees(hudi, by_hudi)
    metadata_agrees(hudi, by_native)


@pytest.mark.parametrize(
    "table_version", [pytest.param(6, marks=pytest.mark.extended), 9], ids=["6", "9"]
)
def test_plans_cross_over_and_both_executors_agree(
    spark: Any,
    hudi_spark: Callable[..., HudiSpark],
    tmp_path: Path,
    table_version: int,
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"mor_v{table_version}"
    write_table(hudi, path, table_version)
    model = sorted(expected_rows(late_update_wins=False))
    twin = tmp_path / f"twin_v{table_version}"

    # tms plans; Hudi's code runs the plan in a tms job, tms's executor on a copy
    planned = schedule_compaction(HudiTable.open(str(path)))
    assert planned is not None
    shutil.copytree(path, twin)
    spec = spec_json(action="compaction", instant=planned, base_path=str(path), executor="hudi")
    if table_version == 9:  # a spark-submit job, as the service launches it
        result = job(spec, tmp_path / "native-plan.log")
    else:
        result = in_child(hudi, path, spec)
    assert result["outcome"] == "SUCCEEDED", result
    figures = result["figures"]
    assert figures["executor"] == "hudi" and "native_declined" not in figures
    assert figures["files_written"] == figures["file_groups"] > 0
    native = execute_compaction(spark, HudiTable.open(str(twin)), planned)
    assert (native.file_groups, native.records_written) == (
        figures["file_groups"],
        figures["records_written"],
    )
    table = HudiTable.open(str(path))
    completed = table.timeline().get(planned)
    assert completed is not None and completed.is_completed
    assert table.config.table_version == table_version  # never upgraded
    actions = {i.action for i in table.timeline().instants}
    assert actions <= {Action.DELTA_COMMIT, Action.COMMIT}  # no clean, no archival
    assert reads(hudi, path) == (model, model)
    assert [s[:3] for s in slices(path)] == [s[:3] for s in slices(twin)]  # same file groups
    agree(hudi, path, twin)

    # Hudi plans, tms's own executor runs the plan
    options = {
        **keyed_table(path.name),
        **HUDI_1_2.write_options(table_version),
        "hoodie.parquet.small.file.limit": "0",  # new keys in new file groups: to cluster
    }
    upsert = [("k1", 40, "p1", 11.5), ("k5", 40, "p1", 55.0), ("k20", 40, "p0", 20.0)]
    hudi.write(path, upsert, SCHEMA, {**options, "hoodie.datasource.write.operation": "upsert"})
    rows = {row[0]: row for row in model} | {row[0]: row for row in upsert}
    scheduled = hudi.run("tests.hudi_java.test_hudi_executor:schedule_with_hudi", str(path))
    assert len(scheduled) == 1
    ran = execute_compaction(spark, HudiTable.open(str(path)), scheduled[0])
    assert ran.files_written == ran.file_groups > 0
    assert HudiTable.open(str(path)).timeline().get(scheduled[0]).is_completed  # type: ignore[union-attr]
    assert reads(hudi, path) == (sorted(rows.values()),) * 2

    # clustering: the same tms plan on two copies (a clustering plan names its files by
    # full path: each copy is planned at the same instant), each run by one executor
    clustered_twin = tmp_path / f"clustered_v{table_version}"
    shutil.copytree(path, clustered_twin)
    clustering = schedule_clustering(HudiTable.open(str(path)), small_file_limit=1 << 30)
    assert clustering is not None
    twin_plan = schedule_clustering(
        HudiTable.open(str(clustered_twin)), small_file_limit=1 << 30, instant_time=clustering
    )
    assert twin_plan == clustering
    spec = spec_json(action="clustering", instant=clustering, executor="hudi")
    by_hudi = in_child(hudi, path, {**spec, "base_path": str(path)})
    assert by_hudi["outcome"] == "SUCCEEDED", by_hudi
    by_native = execute_clustering(spark, HudiTable.open(str(clustered_twin)), clustering)
    assert by_hudi["figures"]["file_groups"] == by_native.file_groups > 0
    assert reads(hudi, path) == (sorted(rows.values()),) * 2
    replaced = [
        HudiTable.open(str(p))
        .timeline()
        .commit_metadata(
            HudiTable.open(str(p)).timeline().get(clustering)  # type: ignore[arg-type]
        )
        for p in (path, clustered_twin)
    ]
    assert replaced[0].replaced_file_ids() == replaced[1].replaced_file_ids()  # type: ignore[attr-defined]
    groups = [sorted({(s[0], s[2]) for s in slices(p)}) for p in (path, clustered_twin)]
    assert len(slices(path)) == len(slices(clustered_twin)) and groups[0] == groups[1]
    agree(hudi, path, clustered_twin)


def test_a_cancel_stops_hudis_compaction_and_its_plan_runs_again(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path
) -> None:
    """The operation is cancelled while Hudi's code compacts (every heartbeat from its stage
    on answers the cancel): its Spark jobs are cancelled, the instant goes back to requested
    with no file of it left, and the plan runs to completion on the next attempt."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "cancelled_v9"
    write_table(hudi, path, 9)
    model = sorted(expected_rows(late_update_wins=False))
    planned = schedule_compaction(HudiTable.open(str(path)))
    assert planned is not None
    fields = {"executor": "hudi", "instant": planned}
    stopped = hudi.run(
        "tests.hudi_java.hudi_jobs:run_cancelled_attempt", str(path), "compaction", fields
    )
    result = stopped["result"]
    assert stopped["code"] == EXIT_OK and stopped["cancelled"], stopped
    instant = HudiTable.open(str(path)).timeline().get(planned)
    assert instant is not None
    if result["outcome"] == "SUCCEEDED":  # Hudi finished before a Spark job of it was cancelled
        assert result["figures"]["cancel_too_late"] and instant.is_completed, result
    else:
        assert result["outcome"] == "CANCELLED", result
        assert instant.state is State.REQUESTED, instant
        written = [p.name for p in path.rglob(f"*{planned}*") if ".hoodie" not in p.parts]
        assert written == [], written
        assert reads(hudi, path) == (model, model)
        metadata_agrees(hudi, path)
        rerun = in_child(hudi, path, spec_json(action="compaction", base_path=str(path), **fields))
        assert rerun["outcome"] == "SUCCEEDED", rerun
    assert HudiTable.open(str(path)).timeline().get(planned).is_completed  # type: ignore[union-attr]
    assert reads(hudi, path) == (model, model)
    metadata_agrees(hudi, path)
