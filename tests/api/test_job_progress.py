"""A job's heartbeats carry its progress: kept on the running attempt, shown in its JSON,
refused when malformed (422 naming the field), never written once the attempt ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy.orm import Session

from tests.api.conftest import bearer
from tests.api.helpers import register, submit
from tests.store.helpers import claim
from tms.store import Attempt, Claim, issue_attempt_token

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _launch(client: TestClient, session: Session) -> tuple[Claim, dict[str, str]]:
    register(client)
    submit(client).raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    return c, bearer(token)


def _beat(client: TestClient, c: Claim, auth: dict[str, str], body: Any) -> Any:
    return client.post(f"/v1/jobs/attempts/{c.attempt.id}/heartbeat", json=body, headers=auth)


def _attempt_json(client: TestClient, c: Claim) -> dict[str, Any]:
    (attempt,) = client.get(f"/v1/operations/{c.operation.id}/attempts").json()
    assert isinstance(attempt, dict)
    return attempt


def test_progress_is_kept_and_returned_with_the_attempt(
    client: TestClient, session: Session
) -> None:
    c, auth = _launch(client, session)
    assert _attempt_json(client, c)["progress"] is None
    assert _beat(client, c, auth, {}).status_code == 200  # a beat without progress
    assert _attempt_json(client, c)["progress"] is None

    progress = {"stage": "compacting", "file_groups_done": 2, "file_groups_planned": 4}
    assert _beat(client, c, auth, {"progress": progress}).status_code == 200
    attempt = _attempt_json(client, c)
    assert attempt["progress"] == progress
    first_at = attempt["progress_at"]
    assert first_at is not None

    # a later beat replaces it; a stage without file groups keeps them null; a field a
    # later job adds is ignored
    later = {"stage": "  planning ", "version": 2}
    assert _beat(client, c, auth, {"progress": later}).status_code == 200
    attempt = _attempt_json(client, c)
    assert attempt["progress"] == {
        "stage": "planning",
        "file_groups_done": None,
        "file_groups_planned": None,
    }
    assert attempt["progress_at"] >= first_at
    # a beat without progress leaves the last one
    assert _beat(client, c, auth, {}).status_code == 200
    assert _attempt_json(client, c)["progress"]["stage"] == "planning"
    one = client.get(f"/v1/operations/{c.operation.id}").json()
    assert one["status"] == "RUNNING"


@pytest.mark.parametrize(
    ("progress", "field", "words"),
    [
        ({"file_groups_done": 1}, "body.progress.stage", "required"),
        ({"stage": ""}, "body.progress.stage", "at least 1"),
        ({"stage": "x" * 65}, "body.progress.stage", "at most 64"),
        ({"stage": "a\nb"}, "body.progress.stage", "control characters"),
        ({"stage": 7}, "body.progress.stage", "string"),
        ({"stage": "s", "file_groups_done": -1}, "body.progress.file_groups_done", "greater than"),
        ({"stage": "s", "file_groups_done": "3"}, "body.progress.file_groups_done", "integer"),
        ({"stage": "s", "file_groups_done": 1.5}, "body.progress.file_groups_done", "integer"),
        ({"stage": "s", "file_groups_done": True}, "body.progress.file_groups_done", "integer"),
        (
            {"stage": "s", "file_groups_planned": 10**12},
            "body.progress.file_groups_planned",
            "less than",
        ),
        (
            {"stage": "s", "file_groups_done": 5, "file_groups_planned": 4},
            "body.progress",
            "file_groups_done (5) must not exceed file_groups_planned (4)",
        ),
        ("compacting", "body.progress", "object"),
    ],
)
def test_malformed_progress_is_refused_naming_the_field(
    client: TestClient, session: Session, progress: Any, field: str, words: str
) -> None:
    c, auth = _launch(client, session)
    good = {"stage": "compacting", "file_groups_done": 1, "file_groups_planned": 2}
    assert _beat(client, c, auth, {"progress": good}).status_code == 200

    refused = _beat(client, c, auth, {"progress": progress})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation_error"
    assert error["field"] == field, error
    assert words in error["message"], error
    assert _attempt_json(client, c)["progress"] == good  # nothing stored


def test_progress_of_an_attempt_that_ended_is_not_written(
    client: TestClient, session: Session
) -> None:
    c, auth = _launch(client, session)
    last = {"stage": "committing", "file_groups_done": 3, "file_groups_planned": 3}
    assert _beat(client, c, auth, {"progress": last}).status_code == 200
    result = {"outcome": "SUCCEEDED", "figures": {"file_groups": 3}}
    done = client.post(f"/v1/jobs/attempts/{c.attempt.id}/result", json=result, headers=auth)
    assert done.status_code == 200, done.text

    late = {"stage": "compacting", "file_groups_done": 0, "file_groups_planned": 9}
    assert _beat(client, c, auth, {"progress": late}).status_code == 409
    attempt = _attempt_json(client, c)
    assert (attempt["outcome"], attempt["progress"]) == ("SUCCEEDED", last)


def test_the_store_writes_progress_only_while_the_attempt_runs(
    client: TestClient, session: Session
) -> None:
    """The guard itself: the heartbeat route checks the lease first, the UPDATE checks the
    attempt's outcome as well."""
    from tms.store.attempts import record_progress

    c, auth = _launch(client, session)
    assert record_progress(session, c.attempt.id, {"stage": "compacting"})
    session.commit()
    row = session.get(Attempt, c.attempt.id)
    assert row is not None
    session.refresh(row)
    assert row.progress == {"stage": "compacting"} and row.progress_at is not None
    done = client.post(
        f"/v1/jobs/attempts/{c.attempt.id}/result", json={"outcome": "FAILED"}, headers=auth
    )
    assert done.status_code == 200, done.text
    assert not record_progress(session, c.attempt.id, {"stage": "late"})
    session.commit()
    session.refresh(row)
    assert row.progress == {"stage": "compacting"}
