"""A small HTTP client of the service's API, for the operator CLI and the demo.

It returns the API's JSON as plain dicts and turns every failure into one of two errors:
`ServiceRefused` (the service answered with an error: its status, code and message) or
`ServiceUnreachable` (no answer at all), so callers can tell a refusal from an outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx

from tms.backoff import Backoff
from tms.config import DEFAULT_CALLBACK_KEY

__all__ = [
    "SUBMIT_PATHS",
    "ApiClient",
    "ClientError",
    "Json",
    "ServiceRefused",
    "ServiceUnreachable",
]

Json = dict[str, Any]

SUBMIT_PATHS = {
    "compaction": "compact",
    "clustering": "cluster",
    "clean": "clean",
    "indexing": "index",
    "metadata-compaction": "metadata-compaction",
    "logcompaction": "logcompact",
}
"""Path segment of each action under `/v1/hoodie/service/` (RFC-43's words)."""

_PAGE = 500  # the API's largest page


RETRY_LATER = frozenset({503, 504})
"""Statuses whose answer says to retry later: storage busy (`storage_busy`) or slow
(`storage_timeout`)."""
NOTIFY_ATTEMPTS = 4
NOTIFY_BACKOFF = Backoff(base_seconds=1.0, factor=2.0, max_seconds=8.0)
"""Waits between a commit notification's attempts: about 1, 2, then 4 s."""


class ClientError(Exception):
    """Any failure of a call; `str()` is a one-line message for people."""


class ServiceRefused(ClientError):
    """The service answered with an error status."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    @classmethod
    def from_response(cls, response: httpx.Response) -> ServiceRefused:
        """The API's `{"error": {code, message, field}}`, or the raw text of anything else
        (a proxy's error page)."""
        try:
            error = response.json().get("error")
        except ValueError:
            error = None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            field = error.get("field")
            return cls(
                response.status_code,
                str(error.get("code") or "error"),
                error["message"],
                field if isinstance(field, str) else None,
            )
        text = " ".join(response.text.split())[:200] or response.reason_phrase
        return cls(response.status_code, "http_error", f"HTTP {response.status_code}: {text}")


class ServiceUnreachable(ClientError):
    """No HTTP answer: connection refused, DNS failure, timeout."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the tms service at {url}: {reason}")
        self.url = url
        self.reason = reason


class ApiClient:
    """Calls one service URL with an optional bearer token."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Any = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One call; raises `ServiceUnreachable` or `ServiceRefused`, else returns the response."""
        try:
            response = self._http.request(method, path, params=params, json=json, headers=headers)
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise ServiceUnreachable(self.url, reason) from exc
        if response.is_error:
            raise ServiceRefused.from_response(response)
        return response

    def _get(self, path: str, params: Any = None) -> Any:
        return self.request("GET", path, params=params).json()

    # Probes ------------------------------------------------------------------------------

    def ready(self) -> bool:
        """True when `/readyz` says the service and its database are ready."""
        try:
            self.request("GET", "/readyz")
        except ServiceRefused:
            return False
        return True

    # Tables ------------------------------------------------------------------------------

    def _pages(self, path: str, params: dict[str, Any], limit: int | None) -> Iterator[Json]:
        """Follow `next_cursor` until `limit` items (None: all)."""
        cursor: str | None = None
        seen = 0
        while limit is None or seen < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - seen)
            query = {**params, "limit": size} | ({"cursor": cursor} if cursor else {})
            page = self._get(path, query)
            for item in page["items"]:
                seen += 1
                yield item
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def tables(
        self, *, db_name: str | None = None, paused: bool | None = None, limit: int | None = None
    ) -> list[Json]:
        params = {k: v for k, v in {"db_name": db_name, "paused": paused}.items() if v is not None}
        return list(self._pages("/v1/tables", params, limit))

    def table(self, table_id: int) -> Json:
        result: Json = self._get(f"/v1/tables/{table_id}")
        return result

    def find_table(self, db_name: str, table_name: str) -> Json | None:
        """The table registered as `db_name.table_name`, if any."""
        for table in self._pages("/v1/tables", {"db_name": db_name}, None):
            if table["table_name"] == table_name:
                return table
        return None

    def add_table(self, body: Json) -> Json:
        """Register a table; the result's `created` says whether this call created it."""
        result: Json = self.request("POST", "/v1/tables", json=body).json()
        return result

    def update_table(self, table_id: int, changes: Json) -> Json:
        result: Json = self.request("PATCH", f"/v1/tables/{table_id}", json=changes).json()
        return result

    def delete_table(self, table_id: int) -> None:
        self.request("DELETE", f"/v1/tables/{table_id}")

    # Savepoints --------------------------------------------------------------------------

    def savepoints(self, table_id: int) -> list[Json]:
        """The table's completed savepoints, oldest first."""
        result: list[Json] = self._get(f"/v1/tables/{table_id}/savepoints")["items"]
        return result

    def add_savepoint(self, table_id: int, body: Json) -> Json:
        """Savepoint a completed write; the result's `created` is false when it stood."""
        path = f"/v1/tables/{table_id}/savepoints"
        result: Json = self.request("POST", path, json=body).json()
        return result

    def delete_savepoint(self, table_id: int, instant: str) -> None:
        self.request("DELETE", f"/v1/tables/{table_id}/savepoints/{instant}")

    def archival_dry_run(
        self, table_id: int, *, keep_min: int | None = None, keep_max: int | None = None
    ) -> Json:
        """What an archival of the table would archive now, and why it stops there."""
        params = {k: v for k, v in {"keep_min": keep_min, "keep_max": keep_max}.items() if v}
        result: Json = self._get(f"/v1/tables/{table_id}/archival", params=params or None)
        return result

    def partition_ttl_dry_run(
        self,
        table_id: int,
        days: int | None,
        *,
        partitions: str | None = None,
        max_partitions: int | None = None,
    ) -> Json:
        """The partitions a partition TTL of `days` days (None: the table policy's) would
        delete now, and those it keeps."""
        params: dict[str, Any] = {}
        if days is not None:
            params["days"] = days
        if partitions:
            params["partitions"] = partitions
        if max_partitions is not None:
            params["max_partitions"] = max_partitions
        result: Json = self._get(f"/v1/tables/{table_id}/partition-ttl", params=params)
        return result

    # Operations --------------------------------------------------------------------------

    def operations(
        self,
        *,
        table_id: int | None = None,
        statuses: Iterable[str] = (),
        action: str | None = None,
        include_deleted: bool = False,
        limit: int | None = 50,
    ) -> list[Json]:
        """Newest first."""
        params: dict[str, Any] = {"include_deleted": include_deleted}
        if table_id is not None:
            params["table_id"] = table_id
        if action:
            params["action"] = action
        wanted = [s for s in statuses if s]
        if wanted:
            params["status"] = wanted
        return list(self._pages("/v1/operations", params, limit))

    def operation(self, operation_id: int) -> Json:
        result: Json = self._get(f"/v1/operations/{operation_id}")
        return result

    def attempts(self, operation_id: int) -> list[Json]:
        result: list[Json] = self._get(f"/v1/operations/{operation_id}/attempts")
        return result

    def workers(self) -> list[Json]:
        result: list[Json] = self._get("/v1/workers")
        return result

    def submit(self, action: str, body: Json) -> Json:
        """RFC-43 submit; the result's `created` is false when it was submitted already."""
        path = f"/v1/hoodie/service/{SUBMIT_PATHS[action]}/submit"
        result: Json = self.request("POST", path, json=body).json()
        return result

    def cancel(self, operation_id: int) -> Json:
        result: Json = self.request("POST", f"/v1/operations/{operation_id}/cancel").json()
        return result

    def retry(self, operation_id: int) -> Json:
        result: Json = self.request("POST", f"/v1/operations/{operation_id}/retry").json()
        return result

    # Writers -----------------------------------------------------------------------------

    def notify_commit(
        self,
        payload: Json,
        *,
        key: str = DEFAULT_CALLBACK_KEY,
        attempts: int = NOTIFY_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Json:
        """Hudi's HTTP commit callback, with its `HUDI-CALLBACK-KEY` header. An answer that
        says to retry later (503 or 504: the table's storage busy or slow to answer) is
        retried after a backoff, up to `attempts` calls in all: a notification is
        idempotent, so repeating one that did land changes nothing."""
        for attempt in range(1, attempts):
            try:
                return self._notify(payload, key)
            except ServiceRefused as refused:
                if refused.status not in RETRY_LATER:
                    raise
            sleep(NOTIFY_BACKOFF.delay(attempt))
        return self._notify(payload, key)

    def _notify(self, payload: Json, key: str) -> Json:
        result: Json = self.request(
            "POST",
            "/v1/hoodie/service/commit",
            json=payload,
            headers={"HUDI-CALLBACK-KEY": key},
        ).json()
        return result
