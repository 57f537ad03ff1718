"""Hudi's own table-service code as tms's second executor, in tms's job protocol: a real
spark-submit job (the command line the service's engine builds, Hudi's bundle on it) fetches
its spec from a stub of the job API, plans or runs with the executor the spec names, beats and
reports. Plans cross over: a plan tms's planner wrote is run by Hudi's code, a plan Hudi's
procedure scheduled is run by tms's own executor, on table versions 6 and 9. Hudi's reader and
hudi-rs read the rows the model expects after each."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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
from tms.hudi.timeline.instant import Action
from tms.jobs.runner import EXIT_OK
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


@pytest.mark.parametrize("table_version", [6, 9])
def test_plans_cross_over_between_tms_and_hudi_executors(
    spark: Any,
    hudi_spark: Callable[..., HudiSpark],
    tmp_path: Path,
    table_version: int,
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"mor_v{table_version}"
    write_table(hudi, path, table_version)
    model = sorted(expected_rows(late_update_wins=False))

    # tms plans, Hudi's code runs the plan in a tms job
    planned = schedule_compaction(HudiTable.open(str(path)))
    assert planned is not None
    spec = spec_json(action="compaction", instant=planned, base_path=str(path), executor="hudi")
    result = job(spec, tmp_path / "native-plan.log")
    assert result["outcome"] == "SUCCEEDED", result
    figures = result["figures"]
    assert figures["executor"] == "hudi" and "native_declined" not in figures
    assert figures["files_written"] == figures["file_groups"] > 0
    table = HudiTable.open(str(path))
    timeline = table.timeline()
    completed = timeline.get(planned)
    assert completed is not None and completed.is_completed
    assert table.config.table_version == table_version  # never upgraded
    assert reads(hudi, path) == (model, model)

    # Hudi plans, tms's own executor runs the plan
    options = {**keyed_table(path.name), **HUDI_1_2.write_options(table_version)}
    upsert = [("k1", 40, "p1", 11.5), ("k5", 40, "p1", 55.0)]
    hudi.write(path, upsert, SCHEMA, {**options, "hoodie.datasource.write.operation": "upsert"})
    rows = {row[0]: row for row in model} | {row[0]: row for row in upsert}
    scheduled = hudi.run("tests.hudi_java.test_hudi_executor:schedule_with_hudi", str(path))
    assert len(scheduled) == 1
    ran = execute_compaction(spark, HudiTable.open(str(path)), scheduled[0])
    assert ran.files_written == ran.file_groups > 0
    assert HudiTable.open(str(path)).timeline().get(scheduled[0]).is_completed  # type: ignore[union-attr]
    assert reads(hudi, path) == (sorted(rows.values()),) * 2


def test_auto_hands_a_table_native_refuses_to_hudi_and_says_why(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path
) -> None:
    """A partial-update payload: native declines before planning, Hudi's code plans and runs
    the compaction, and the result names the executor and the reason."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "partial_v6"
    options = {
        **keyed_table(path.name),
        **HUDI_1_2.write_options(6),
        "hoodie.datasource.write.payload.class": (
            "org.apache.hudi.common.model.PartialUpdateAvroPayload"
        ),
    }
    first = [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(6)]
    update = [("k1", 20, "p1", None), ("k2", 20, "p0", 22.0)]
    hudi.write(path, first, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    hudi.write(path, update, SCHEMA, {**options, "hoodie.datasource.write.operation": "upsert"})
    before = hudi.read(path, COLUMNS)  # hudi-rs does not merge partial updates: Hudi's reader
    assert ("k1", 20, "p1", 1.0) in before  # the partial update kept k1's val

    spec = spec_json(action="compaction", base_path=str(path), executor="auto")
    result = job(spec, tmp_path / "auto.log")
    assert result["outcome"] == "SUCCEEDED", result
    figures = result["figures"]
    assert figures["executor"] == "hudi"
    assert "payload" in figures["native_declined"]
    timeline = HudiTable.open(str(path)).timeline()
    compactions = [i for i in timeline.instants if i.action is Action.COMMIT]
    assert [i.requested_time for i in compactions] == [figures["instant"]]
    assert compactions[0].is_completed
    assert reads(hudi, path) == (before, before)  # base files only now: hudi-rs reads them
