"""A job spec read once (`tms.jobs.job.Job`): its service, its lock, and the planning
parameters of a plan-less operation only."""

from __future__ import annotations

import pytest

from tests.jobs.stub_api import spec_json
from tms.executor_choice import NATIVE
from tms.jobs.client import JobSpec
from tms.jobs.job import Job
from tms.planning import BadJobInput
from tms.services.registry import table_service


def _job(**overrides: object) -> Job:
    return Job.of(JobSpec.from_json(spec_json(**overrides)))


def test_a_plan_less_operation_reads_its_planning_parameters_once() -> None:
    job = _job(action="clustering", extra_params={"sort_columns": "a,b"})
    assert job.service is table_service("clustering") and job.executor == NATIVE
    assert job.planning is not None and job.planning["sort_columns"] == ["a", "b"]
    assert not job.direct and not job.plans_on_spark


def test_an_operation_with_a_plan_does_not_read_planning_parameters() -> None:
    job = _job(instant="20250101000000001", extra_params={"target_file_size": "x"})
    assert job.instant == "20250101000000001" and job.planning is None
    with pytest.raises(BadJobInput, match="target_file_size"):
        _job(action="clustering", extra_params={"target_file_size": "x"})


def test_an_index_drop_is_direct_work_of_tms_own_code_whoever_was_asked() -> None:
    job = _job(
        action="indexing",
        executor="hudi",
        extra_params={"partitions": "record_index", "drop": "true"},
    )
    assert job.direct and not job.plans_on_spark
    build = _job(action="indexing", extra_params={"partitions": "record_index"})
    assert not build.direct
    planned = _job(action="indexing", instant="20250101000000001")
    assert not planned.direct


def test_an_action_tms_jobs_do_not_run_is_refused() -> None:
    with pytest.raises(BadJobInput, match="not supported by tms jobs"):
        _job(action="commit")
