"""The request bodies of Apache Hudi's RFC-43 design (rfc/rfc-43/rfc-43.md, "Interface
design"), sent as the design writes them: `parallelism` and `resource` as strings, engine
`Spark`, an empty `extra_params`, queue `root.default` and a 14-digit instant."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.services.test_clustering import group_target, small_files_table
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.services.clustering.execute import schedule_clustering
from tms.services.compaction.execute import schedule_compaction

if TYPE_CHECKING:
    from httpx import Response
    from starlette.testclient import TestClient

DESIGN_SUBMIT = """{
"db_name":"db_name",
"table_name":"table_name",
"owner":"default",
"queue":"root.default",
"instant":"20220908000000",
"resource":"4g:4g",
"parallelism":"1000",
"execution_engine":"Spark",
"extra_params":""
}"""
DESIGN_REMOVE = """{
"db_name":"db_name",
"table_name":"table_name",
"instant":"20220908000000"
}"""
DESIGN_INSTANT = "20220908000000"
DESIGN_PARALLELISM = '"parallelism":"1000"'
SERVICE = "/v1/hoodie/service"

Scheduler = Callable[[str], str | None]


def _post(client: TestClient, path: str, text: str) -> Response:
    """The body as raw JSON text, as a client written to the design sends it."""
    response: Response = client.post(
        f"{SERVICE}/{path}", content=text.encode(), headers={"Content-Type": "application/json"}
    )
    return response


def _register(client: TestClient, base_path: str, **params: Any) -> None:
    """The table under the design's own names, so the bodies keep `db_name`/`table_name`."""
    body = {"db_name": "db_name", "table_name": "table_name", "base_path": base_path}
    response = client.post(f"{SERVICE}/register", json=body, params=params)
    assert response.status_code == 201, response.text


def _compaction_plan(base: str) -> str | None:
    return schedule_compaction(HudiTable.open(base))


def _clustering_plan(base: str) -> str | None:
    return schedule_clustering(HudiTable.open(base), target_file_size=group_target(base))


def _assert_as_designed(operation: dict[str, Any], action: str, instant: str) -> None:
    assert (operation["action"], operation["instant"]) == (action, instant)
    assert (operation["db_name"], operation["table_name"]) == ("db_name", "table_name")
    assert (operation["parallelism"], operation["resource"], operation["engine"]) == (
        1000,
        "4g:4g",
        "spark",
    )
    assert (operation["owner"], operation["queue"]) == ("default", "root.default")
    assert operation["extra_params"] == {}


@pytest.mark.parametrize(
    ("service", "action", "table_type", "plan"),
    [
        ("compact", "compaction", MERGE_ON_READ, _compaction_plan),
        ("cluster", "clustering", COPY_ON_WRITE, _clustering_plan),
    ],
)
def test_the_design_bodies_submit_and_remove_a_pending_plan(
    client: TestClient,
    tmp_path: Path,
    service: str,
    action: str,
    table_type: str,
    plan: Scheduler,
) -> None:
    base = small_files_table(tmp_path, table_type, rows=240)
    planned = plan(base)
    assert planned is not None
    _register(client, base)
    # Only the instant is adapted: the design's names the plan of a table written on
    # 2022-09-08, and a plan is always later than the commits of the table it is on, so a
    # table written now holds its plan at a time of today.
    submit_body = DESIGN_SUBMIT.replace(DESIGN_INSTANT, planned)
    remove_body = DESIGN_REMOVE.replace(DESIGN_INSTANT, planned)

    first = _post(client, f"{service}/submit", submit_body)
    assert first.status_code == 201, first.text
    assert first.json()["created"] is True and first.json()["status"] == "SCHEDULED"
    _assert_as_designed(first.json(), action, planned)
    stored = client.get(f"/v1/operations/{first.json()['id']}").json()
    _assert_as_designed(stored, action, planned)
    again = _post(client, f"{service}/submit", submit_body)
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])

    removed = _post(client, f"{service}/remove", remove_body)
    assert removed.status_code == 200, removed.text
    assert (removed.json()["status"], removed.json()["is_deleted"]) == ("CANCELLED", True)
    assert first.json()["id"] not in [o["id"] for o in client.get("/v1/operations").json()["items"]]
    # A clustering plan is cancellable (RFC-79): the remove asked its writers to drop it.
    requested = cancel_requests.is_cancel_requested(HudiTable.open(base).storage, planned)
    assert requested is (action == "clustering")


def test_the_design_bodies_verbatim_with_their_14_digit_instant(client: TestClient) -> None:
    """Hudi writes yyyyMMddHHmmss instants on tables from before 0.10 and still reads them
    (HoodieInstantTimeGenerator's SECS_INSTANT_ID_LENGTH); the design's example is one."""
    _register(client, "/data/lake/table_name", pending=True)
    for service, action in (("compact", "compaction"), ("cluster", "clustering")):
        submitted = _post(client, f"{service}/submit", DESIGN_SUBMIT)
        assert submitted.status_code == 201, submitted.text
        _assert_as_designed(submitted.json(), action, DESIGN_INSTANT)
        removed = _post(client, f"{service}/remove", DESIGN_REMOVE)
        assert removed.status_code == 200, removed.text
        assert (removed.json()["instant"], removed.json()["is_deleted"]) == (DESIGN_INSTANT, True)


@pytest.mark.parametrize(
    ("given", "stored"),
    [("1000", 1000), ('"1000"', 1000), ('" 8 "', 8), ('"+16"', 16), ('"100000"', 100_000)],
)
def test_parallelism_as_a_number_or_a_string_of_digits(
    client: TestClient, given: str, stored: int
) -> None:
    """`given` is JSON: an integer keeps working next to the design's string."""
    _register(client, "/data/lake/table_name", pending=True)
    body = DESIGN_SUBMIT.replace(DESIGN_PARALLELISM, f'"parallelism":{given}')
    response = _post(client, "compact/submit", body)
    assert response.status_code == 201, response.text
    assert response.json()["parallelism"] == stored


NOT_WHOLE = "expected a whole number of tasks such as 1000, as an integer or a string of digits"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ('"abc"', f"{NOT_WHOLE} (got 'abc')"),
        ('"1.5"', f"{NOT_WHOLE} (got '1.5')"),
        ('"1e3"', f"{NOT_WHOLE} (got '1e3')"),
        ('"\\u0662"', f"{NOT_WHOLE} (got '\u0662')"),  # an Arabic-Indic 2 is not a digit here
        ('"0"', "must be at least 1 (got '0')"),
        ('"-1"', "must be at least 1 (got '-1')"),
        ('"100001"', "must be at most 100000 (got '100001')"),
        ('"99999999999999999999999"', "must be at most 100000 (got '99999999999999999999999')"),
        ('""', "must not be blank (leave it out for the engine's own) (got '')"),
        ("0", "must be at least 1 (got 0)"),
        ("1.5", "Input should be a valid integer (got 1.5)"),
        ("true", "Input should be a valid integer (got True)"),
    ],
)
def test_a_bad_parallelism_is_a_422_naming_it(client: TestClient, given: str, message: str) -> None:
    _register(client, "/data/lake/table_name", pending=True)
    body = DESIGN_SUBMIT.replace(DESIGN_PARALLELISM, f'"parallelism":{given}')
    response = _post(client, "compact/submit", body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", "body.parallelism")
    assert error["message"] == f"body.parallelism: {message}"


@pytest.mark.parametrize("field", ["priority", "max_retries"])
def test_tms_own_numbers_in_the_submit_stay_strict(client: TestClient, field: str) -> None:
    """`priority` and `max_retries` are tms's, not the design's: `"2"` is not 2."""
    _register(client, "/data/lake/table_name", pending=True)
    body = DESIGN_SUBMIT.replace(DESIGN_PARALLELISM, f'{DESIGN_PARALLELISM},"{field}":"2"')
    response = _post(client, "compact/submit", body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == f"body.{field}"
