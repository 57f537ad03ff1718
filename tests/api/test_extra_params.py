"""`extra_params` of operation requests: Spark settings only from the allow-list, planning
parameters only those the job knows; refused before anything is stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.api.conftest import ADMIN, AUTH_TOKENS, WRITER, MakeClient, bearer
from tests.api.helpers import instant, register, submit
from tms.store import Operation, Tbl

if TYPE_CHECKING:
    from starlette.testclient import TestClient

CODE_RUNNING = [
    "spark.pyspark.driver.python",
    "spark.jars",
    "spark.plugins",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.executorEnv.LD_PRELOAD",
    "spark.sql.adaptive.customCostEvaluatorClass",
]


def _operations(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Operation)) or 0


@pytest.mark.parametrize("key", CODE_RUNNING)
def test_submit_refuses_spark_settings_off_the_allow_list(
    client: TestClient, session: Session, key: str
) -> None:
    register(client)
    params = {key: "/usr/bin/id", "spark.executor.cores": "2"}
    response = submit(client, instant=instant(), extra_params=params)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", f"body.extra_params.{key}")
    assert f"{key} is not allowed" in error["message"]
    assert [e["field"] for e in error["errors"]] == [f"body.extra_params.{key}"]
    assert _operations(session) == 0


def test_submit_takes_tuning_settings_and_planning_parameters(client: TestClient) -> None:
    register(client)
    params = {
        "spark.executor.memory": "4g",
        "spark.sql.adaptive.enabled": True,
        "spark.speculation": False,
        "retained": 3,  # clean's, accepted and unused by a compaction
        "strategy": "log-size",
    }
    response = submit(client, instant=instant(), extra_params=params)
    assert response.status_code == 201, response.text
    assert response.json()["extra_params"]["spark.executor.memory"] == "4g"


def test_submit_refuses_unknown_planning_keys_and_unusable_values(
    client: TestClient, session: Session
) -> None:
    register(client)
    response = submit(
        client, "clean", extra_params={"retaind": "3", "retained": "0", "spark.jars": "x.jar"}
    )
    assert response.status_code == 422, response.text
    problems = {e["field"]: e["message"] for e in response.json()["error"]["errors"]}
    assert sorted(problems) == [
        "body.extra_params.retaind",
        "body.extra_params.retained",
        "body.extra_params.spark.jars",
    ]
    assert "retaind is not allowed" in problems["body.extra_params.retaind"]
    assert "must be positive" in problems["body.extra_params.retained"]
    assert _operations(session) == 0


def test_an_admin_token_gets_no_exception(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    registered = client.post(
        "/v1/hoodie/service/register?pending=true",
        json={"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"},
        headers=bearer(WRITER),
    )
    assert registered.status_code == 201, registered.text
    response = client.post(
        "/v1/hoodie/service/compact/submit",
        json={"db_name": "lake", "table_name": "trips", "extra_params": {"spark.jars": "a"}},
        headers=bearer(ADMIN),
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "body.extra_params.spark.jars"


def test_administrators_extend_the_list_at_start(make_client: MakeClient) -> None:
    client = make_client(spark_conf_allowed_extra="spark.kubernetes.container.image")
    register(client)
    params = {"spark.kubernetes.container.image": "tms:1"}
    response = submit(client, instant=instant(), extra_params=params)
    assert response.status_code == 201, response.text


def test_the_hudi_clients_request_is_checked_before_it_registers_anything(
    client: TestClient, session: Session
) -> None:
    params = {
        "basepath": "/data/lake/unknown",
        "instant": instant(),
        "action": "REQUEST",
        "extra_params": "spark.executor.cores=2;spark.pyspark.python=/usr/bin/id",
    }
    response = client.get("/v1/hoodie/service/compact", params=params)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "query.extra_params"
    assert "spark.pyspark.python is not allowed" in error["message"]
    assert session.scalar(select(func.count()).select_from(Tbl)) == 0
    assert _operations(session) == 0
    # CANCEL carries the client's parameters too; they are not used, so not checked.
    cancel = client.get("/v1/hoodie/service/compact", params={**params, "action": "CANCEL"})
    assert cancel.status_code == 404


@pytest.mark.parametrize(
    ("value", "problem"),
    [("lots", "not a size such as 512m"), ("512k", "under 1m"), ("", "not a size")],
)
def test_a_task_memory_budget_that_is_not_a_size_is_refused_naming_it(
    client: TestClient, session: Session, value: str, problem: str
) -> None:
    register(client)
    response = submit(client, instant=instant(), extra_params={"spark.tms.task.memory": value})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "body.extra_params.spark.tms.task.memory"
    assert problem in error["message"]
    assert _operations(session) == 0
    accepted = submit(client, instant=instant(), extra_params={"spark.tms.task.memory": "512m"})
    assert accepted.status_code == 201, accepted.text
