"""A worker's HTTP client of `/v1/workers` (register, claim, leave), with an admin token."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["ClaimedAttempt", "WorkerApiError", "WorkerClient"]

log = logging.getLogger(__name__)


class WorkerApiError(Exception):
    """The service did not answer, or refused (the status, when it answered)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ClaimedAttempt:
    attempt_id: int
    operation_id: int
    action: str
    token: str


class WorkerClient:
    def __init__(
        self,
        api_url: str,
        worker_id: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.worker_id = worker_id
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=f"{self.api_url}/v1",
            headers=headers,
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def register(
        self, *, host: str, pid: int, spark_master: str, queues: list[str], slots: int
    ) -> None:
        body = {
            "id": self.worker_id,
            "host": host,
            "pid": pid,
            "spark_master": spark_master,
            "queues": queues,
            "slots": slots,
        }
        self._call("POST", "/workers", body)

    def claim(
        self, *, free: int, busy: int, wait_seconds: float, log_dir: str | None
    ) -> list[ClaimedAttempt]:
        """Attempts to run now (empty after `wait_seconds` without due work). The HTTP
        timeout outlasts the long poll."""
        body = {"free": free, "busy": busy, "wait_seconds": wait_seconds, "log_dir": log_dir}
        data = self._call(
            "POST", f"/workers/{self.worker_id}/claim", body, timeout=wait_seconds + 30
        )
        return [
            ClaimedAttempt(
                int(a["attempt_id"]), int(a["operation_id"]), str(a["action"]), str(a["token"])
            )
            for a in data.get("attempts", [])
        ]

    def leave(self) -> None:
        try:
            self._call("DELETE", f"/workers/{self.worker_id}")
        except WorkerApiError as exc:
            log.warning("could not leave the service: %s", exc)

    def _call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        try:
            response = self._http.request(
                method,
                path,
                json=body,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TransportError as exc:
            raise WorkerApiError(f"{method} /v1{path}: {exc!r}") from exc
        if response.status_code >= 300:
            raise WorkerApiError(
                f"{method} /v1{path}: HTTP {response.status_code}: {response.text[:300]}",
                response.status_code,
            )
        return response.json() if response.content else {}
