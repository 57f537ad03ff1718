"""The job's HTTP client of the service's job-side endpoints (spec, heartbeat, instant,
table lock, result), authorised by the attempt's bearer token.

JobApiError
├── ApiUnavailable    no answer (connection error, timeout, 502/503/504) after retries
├── AttemptGone       401/404/409: this attempt may no longer act; stop at once
└── ApiRejected       another 4xx/5xx: the request itself is wrong
    └── InstantTaken  409 operation_conflict: another operation tracks that plan
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from tms.executor_choice import AUTO, ExecutorChoice, parse_executor

__all__ = [
    "ApiRejected",
    "ApiUnavailable",
    "AttemptApi",
    "AttemptGone",
    "HeartbeatReply",
    "InstantTaken",
    "JobApiError",
    "JobClient",
    "JobSpec",
    "Outcome",
]

log = logging.getLogger(__name__)

Outcome = Literal["SUCCEEDED", "FAILED", "CANCELLED", "INVALID"]
_RETRY_STATUSES = frozenset({502, 503, 504})
_GONE_STATUSES = frozenset({401, 404, 409})


class JobApiError(Exception):
    """The service could not be asked, or said no."""


class ApiUnavailable(JobApiError):
    """No usable answer after the retries (the service may be restarting)."""


class AttemptGone(JobApiError):
    """The token or attempt is no longer valid: lease lost, attempt finished, or taken over."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ApiRejected(JobApiError):
    """The service refused the request (a bug on one side; retrying will not help)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class InstantTaken(ApiRejected):
    """Another operation of the table already tracks that instant: not ours to run."""


@dataclass(frozen=True)
class JobSpec:
    """What to run, as the service describes the attempt."""

    attempt_id: int
    operation_id: int
    action: str
    instant: str | None
    base_path: str
    db_name: str
    table_name: str
    parallelism: int | None = None
    resource: str | None = None
    extra_params: dict[str, Any] = field(default_factory=dict)
    heartbeat_interval_seconds: float = 10.0
    lease_seconds: float | None = None
    """How long the lease outlives the last answered heartbeat (None: a service that does not
    say; the job then stops only when told its lease is lost)."""
    cancel_requested: bool = False
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    """The table's storage options (secrets): passed to fsspec and Spark tasks, never shown."""
    executor: ExecutorChoice = AUTO
    """Who runs the plan (`tms.executor_choice`); `auto` decides once the job has read the table."""

    @classmethod
    def from_json(cls, data: Any) -> JobSpec:
        try:
            return cls(
                attempt_id=int(data["attempt_id"]),
                operation_id=int(data["operation_id"]),
                action=str(data["action"]),
                instant=None if data.get("instant") is None else str(data["instant"]),
                base_path=str(data["base_path"]),
                db_name=str(data["db_name"]),
                table_name=str(data["table_name"]),
                parallelism=None if data.get("parallelism") is None else int(data["parallelism"]),
                resource=data.get("resource"),
                extra_params=dict(data.get("extra_params") or {}),
                heartbeat_interval_seconds=float(data["heartbeat_interval_seconds"]),
                lease_seconds=(
                    None if data.get("lease_seconds") is None else float(data["lease_seconds"])
                ),
                cancel_requested=bool(data.get("cancel_requested", False)),
                storage_options=dict(data.get("storage_options") or {}),
                executor=parse_executor(data.get("executor", AUTO)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ApiRejected(f"malformed job spec: {exc!r}", 200) from exc


@dataclass(frozen=True)
class HeartbeatReply:
    lease_expires_at: str | None
    cancel_requested: bool


class AttemptApi(Protocol):
    """What a job asks of whoever tracks its attempt: the service over HTTP (`JobClient`),
    or nobody, for a `tms run` in its own process (`tms.jobs.local.LocalAttempt`)."""

    @property
    def attempt_id(self) -> int: ...

    def spec(self) -> JobSpec: ...

    def heartbeat(
        self, *, progress: dict[str, Any] | None = None, retries: int | None = None
    ) -> HeartbeatReply: ...

    def claim_instant(self, instant: str) -> bool: ...

    def take_table_lock(self) -> bool: ...

    def release_table_lock(self) -> None: ...

    def report_result(
        self,
        outcome: Outcome,
        *,
        error: str | None = None,
        retryable: bool = False,
        figures: dict[str, Any] | None = None,
        spark_app_id: str | None = None,
        retries: int | None = None,
    ) -> None: ...


class JobClient:
    """One attempt's conversation with the service. Connection errors and 502/503/504 are
    retried with exponential backoff; every request of the contract is idempotent."""

    def __init__(
        self,
        api_url: str,
        attempt_id: int,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff_seconds: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.attempt_id = attempt_id
        self._retries = retries
        self._backoff = backoff_seconds
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=f"{api_url.rstrip('/')}/v1/jobs/attempts/{attempt_id}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JobClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def spec(self) -> JobSpec:
        return JobSpec.from_json(self._request("GET", "/spec"))

    def heartbeat(
        self, *, progress: dict[str, Any] | None = None, retries: int | None = None
    ) -> HeartbeatReply:
        """Extend the lease; `progress` (stage, file groups done and planned) is kept on the
        attempt."""
        body = {} if progress is None else {"progress": progress}
        data = self._request("POST", "/heartbeat", body, retries=retries)
        return HeartbeatReply(data.get("lease_expires_at"), bool(data.get("cancel_requested")))

    def report_instant(self, instant: str) -> None:
        self._request("POST", "/instant", {"instant": instant})

    def claim_instant(self, instant: str) -> bool:
        """Report `instant` as this operation's plan; False when another operation has it."""
        try:
            self.report_instant(instant)
        except InstantTaken:
            return False
        return True

    def take_table_lock(self) -> bool:
        """Ask for the table's PostgreSQL advisory lock once: False while another holds it."""
        return bool(self._request("POST", "/table-lock", {}).get("held"))

    def release_table_lock(self) -> None:
        self._request("DELETE", "/table-lock")

    def report_result(
        self,
        outcome: Outcome,
        *,
        error: str | None = None,
        retryable: bool = False,
        figures: dict[str, Any] | None = None,
        spark_app_id: str | None = None,
        retries: int | None = None,
    ) -> None:
        body = {
            "outcome": outcome,
            "error": error,
            "retryable": retryable,
            "figures": figures or {},
            "spark_app_id": spark_app_id,
        }
        self._request("POST", "/result", body, retries=retries)

    def _request(
        self, method: str, path: str, body: Any = None, *, retries: int | None = None
    ) -> Any:
        attempts = 1 + (self._retries if retries is None else retries)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._http.request(method, path, json=body)
            except httpx.TransportError as exc:
                if last:
                    raise ApiUnavailable(f"{method} {path}: {exc!r}") from exc
                log.warning("%s %s failed (%r); retrying", method, path, exc)
            else:
                if response.status_code not in _RETRY_STATUSES:
                    return _decode(method, path, response)
                if last:
                    raise ApiUnavailable(f"{method} {path}: HTTP {response.status_code}")
                log.warning("%s %s: HTTP %s; retrying", method, path, response.status_code)
            delay = min(10.0, self._backoff * 2**attempt)
            self._sleep(delay * (0.9 + 0.2 * random.random()))
        raise AssertionError("unreachable")


def _decode(method: str, path: str, response: httpx.Response) -> Any:
    status = response.status_code
    if status < 300:
        try:
            return response.json() if response.content else {}
        except ValueError as exc:
            raise ApiRejected(f"{method} {path}: response is not JSON", status) from exc
    detail = _detail(response)
    message = f"{method} {path}: HTTP {status}: {detail}"
    if status == 409 and _code(response) == "operation_conflict":
        raise InstantTaken(message, status)
    if status in _GONE_STATUSES:
        raise AttemptGone(message, status)
    raise ApiRejected(message, status)


def _code(response: httpx.Response) -> str | None:
    """The API's stable error code (`{"error": {"code": …}}`), when the body has one."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _detail(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])[:500]
    return str(data)[:500]
