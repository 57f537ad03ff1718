"""An archival attempt is direct work Hudi's code does: the job starts Spark with Hudi's
executor decided (its bundle) before the work, reports who ran it and why native declined;
with nothing due it reports so without starting Spark; `native` is refused before Spark
starts, and keep settings Hudi refuses fail the attempt for good."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.jobs.stub_api import spec_json, stub_api
from tests.jobs.test_job import _job
from tests.jobs.test_runner import FakeSpark, no_spark, results, routes, run
from tests.services.test_archival_plan import Hand, T
from tms.hudi.actions import ARCHIVAL
from tms.jobs.client import JobSpec
from tms.jobs.runner import EXIT_FAILED, EXIT_OK
from tms.testing.sample_writer.new_table import create_table


def table(tmp_path: Path) -> str:
    base = str(tmp_path / "trips")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts")
    return base


def test_an_archival_job_is_direct_work_on_spark_whatever_its_planning() -> None:
    job = _job(action=ARCHIVAL, extra_params={"keep_min": "3", "keep_max": "5"})
    assert job.direct and job.direct_on_spark and not job.plans_on_spark
    assert job.planning == {"keep_min": 3, "keep_max": 5}
    assert _job(action=ARCHIVAL).direct


def test_nothing_due_is_reported_without_starting_spark(tmp_path: Path) -> None:
    spec = spec_json(action=ARCHIVAL, base_path=table(tmp_path))
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=no_spark)
        (result,) = results(api)
    assert code == EXIT_OK and result["outcome"] == "SUCCEEDED", result
    figures = result["figures"]
    assert figures["executor"] == "hudi"
    assert "no archival executor" in figures["native_declined"]
    assert figures["nothing_to_do"] is True and figures["stopped_by"] == "keep_max"
    assert "0 completed commits" in figures["reason"]
    assert result["spark_app_id"] is None


def test_with_instants_due_spark_starts_with_hudis_executor(tmp_path: Path) -> None:
    hand = Hand(tmp_path, table_version=9)
    hand.commits(T[:15])  # past keep.max, as the cleaner's retention raises it (13)
    started: list[JobSpec] = []

    def spark(spec: JobSpec, instant: str) -> Any:
        started.append(spec)
        return FakeSpark()  # no Hudi in it: the archive call itself fails

    extra = {"keep_min": "3", "keep_max": "5"}
    spec = spec_json(action=ARCHIVAL, base_path=hand.base, extra_params=extra)
    with stub_api(routes(spec)) as api:
        run(api, spark_factory=spark)
        (result,) = results(api)
    assert [s.executor for s in started] == ["hudi"], result  # Hudi's bundle on its Spark
    assert result["outcome"] == "FAILED" and result["spark_app_id"] is None


def test_native_is_refused_before_spark_starts(tmp_path: Path) -> None:
    spec = spec_json(action=ARCHIVAL, base_path=table(tmp_path), executor="native")
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=no_spark)
        (result,) = results(api)
    assert code == EXIT_FAILED and result["outcome"] == "FAILED" and not result["retryable"]
    assert "no archival executor" in result["error"]


def test_keep_settings_hudi_refuses_fail_for_good(tmp_path: Path) -> None:
    extra = {"keep_max": "3"}  # not above the table's keep.min, Hudi's 20
    spec = spec_json(action=ARCHIVAL, base_path=table(tmp_path), extra_params=extra)
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=lambda s, i: FakeSpark())
        (result,) = results(api)
    assert code == EXIT_FAILED and not result["retryable"]
    assert "keep_max" in result["error"] and "hoodie.keep.min.commits" in result["error"]


def test_an_archival_naming_an_instant_is_direct_work_all_the_same(tmp_path: Path) -> None:
    spec = spec_json(action=ARCHIVAL, base_path=table(tmp_path), instant="20250101000000001")
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=lambda s, i: FakeSpark())
        (result,) = results(api)
    assert code == EXIT_OK and result["figures"]["nothing_to_do"] is True, result
