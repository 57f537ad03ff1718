"""The job's HTTP client: auth header, retries, and how refusals are told apart."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tms.jobs.client import (
    ApiRejected,
    ApiUnavailable,
    AttemptGone,
    JobClient,
    JobSpec,
)


def client(url: str, **kwargs: object) -> JobClient:
    return JobClient(url, 5, "tok", sleep=lambda _: None, **kwargs)  # type: ignore[arg-type]


def test_spec_heartbeat_instant_and_result() -> None:
    routes = {
        "GET /spec": [(200, spec_json(extra_params={"retained": 2}, parallelism=4))],
        "POST /heartbeat": [OK_BEAT],
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }
    with stub_api(routes) as api, client(api.url) as job:
        spec = job.spec()
        assert spec == JobSpec(
            attempt_id=5,
            operation_id=3,
            action="compaction",
            instant=None,
            base_path="/nowhere",
            db_name="db",
            table_name="t",
            parallelism=4,
            extra_params={"retained": 2},
            heartbeat_interval_seconds=0.1,
        )
        assert job.heartbeat().cancel_requested is False
        job.report_instant("20250101000000000")
        job.report_result("SUCCEEDED", figures={"files_written": 2}, spark_app_id="local-1")
    assert {auth for _, _, auth, _ in api.requests} == {"Bearer tok"}
    assert api.calls("POST /heartbeat") == [{}]
    assert api.calls("POST /instant") == [{"instant": "20250101000000000"}]
    assert api.calls("POST /result") == [
        {
            "outcome": "SUCCEEDED",
            "error": None,
            "retryable": False,
            "figures": {"files_written": 2},
            "spark_app_id": "local-1",
        }
    ]


@pytest.mark.parametrize("status", [401, 404, 409])
def test_refusals_mean_the_attempt_is_gone(status: int) -> None:
    routes = {"POST /heartbeat": [(status, {"detail": "attempt 5 is no longer current"})]}
    with stub_api(routes) as api, client(api.url) as job, pytest.raises(AttemptGone) as info:
        job.heartbeat()
    assert info.value.status == status and "no longer current" in str(info.value)
    assert len(api.requests) == 1  # never retried


def test_unavailable_service_is_retried() -> None:
    routes: dict[str, Any] = {"POST /result": [(503, {}), (502, {}), (200, {})]}
    with stub_api(routes) as api, client(api.url) as job:
        job.report_result("FAILED", error="boom", retryable=True)
    assert len(api.calls("POST /result")) == 3


def test_retries_run_out() -> None:
    with (
        stub_api({"GET /spec": [(503, {})]}) as api,
        client(api.url, retries=2) as job,
        pytest.raises(ApiUnavailable),
    ):
        job.spec()
    assert len(api.requests) == 3


def test_connection_refused_is_retried_then_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    slept: list[float] = []
    job = JobClient(f"http://127.0.0.1:{port}", 5, "tok", retries=3, sleep=slept.append)
    with job, pytest.raises(ApiUnavailable):
        job.heartbeat()
    assert len(slept) == 3 and slept[1] > slept[0]


def test_bad_request_and_malformed_spec_are_rejected() -> None:
    routes = {"POST /result": [(422, {"detail": "outcome"})], "GET /spec": [(200, {"x": 1})]}
    with stub_api(routes) as api, client(api.url) as job:
        with pytest.raises(ApiRejected, match="422"):
            job.report_result("SUCCEEDED")
        with pytest.raises(ApiRejected, match="malformed job spec"):
            job.spec()
