"""The API client's commit notification, as the demo (a writer) sends it: an answer that says to
retry later (503, 504: the table's storage busy or slow) is retried after a backoff; any other
refusal, and the last retry-later answer, reaches the caller."""

from __future__ import annotations

import pytest

from tests.jobs.stub_api import stub_api
from tms.api_client import NOTIFY_ATTEMPTS, ApiClient, ServiceRefused

SLOW = (504, {"error": {"code": "storage_timeout", "message": "retry later"}})
BUSY = (503, {"error": {"code": "storage_busy", "message": "retry later"}})
BAD = (400, {"error": {"code": "invalid", "message": "commitTime is missing", "field": "x"}})
PAYLOAD = {"commitTime": "20260101000000000", "tableName": "t", "basePath": "/t"}


def test_a_retry_later_answer_is_retried_after_a_backoff() -> None:
    waits: list[float] = []
    with stub_api({"POST /commit": [SLOW, BUSY, (200, {"accepted": True})]}) as api:
        with ApiClient(api.url) as client:
            answer = client.notify_commit(PAYLOAD, sleep=waits.append)
        assert len(api.calls("POST /commit")) == 3
    assert answer == {"accepted": True}
    assert len(waits) == 2 and 0 < waits[0] < waits[1]


def test_the_last_retry_later_answer_and_other_refusals_reach_the_caller() -> None:
    waits: list[float] = []
    with stub_api({"POST /commit": [SLOW]}) as api, ApiClient(api.url) as client:
        with pytest.raises(ServiceRefused) as slow:
            client.notify_commit(PAYLOAD, sleep=waits.append)
        assert len(api.calls("POST /commit")) == NOTIFY_ATTEMPTS
    assert slow.value.status == 504 and len(waits) == NOTIFY_ATTEMPTS - 1

    with stub_api({"POST /commit": [BAD]}) as api, ApiClient(api.url) as client:
        with pytest.raises(ServiceRefused) as bad:
            client.notify_commit(PAYLOAD, sleep=waits.append)
        assert len(api.calls("POST /commit")) == 1
    assert bad.value.status == 400 and bad.value.field == "x"
