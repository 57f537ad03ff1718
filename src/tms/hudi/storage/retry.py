"""Retries of object-store calls: which failures are passing, how long to wait, how often.

Object stores fail a share of requests in production: `500 InternalError`, `503 SlowDown`,
connections reset, answers that never come or stop halfway. `Storage` retries each call that
is safe to repeat (reads, listings, whole-object PUTs, deletes) after a wait drawn with full
jitter (uniform between 0 and `base_seconds · 2^attempt`, capped at `max_seconds`), so
clients throttled together do not come back together; the store library's own retries are
turned off (`client_options`) so this is the one policy and every retry is counted
(`RETRIED`). A read that stalls ends at `read_timeout_seconds`.

The settings come from the environment (`TMS_STORAGE_RETRIES`, `TMS_STORAGE_RETRY_BASE_SECONDS`,
`TMS_STORAGE_RETRY_MAX_SECONDS`, `TMS_STORAGE_CONNECT_TIMEOUT_SECONDS`,
`TMS_STORAGE_READ_TIMEOUT_SECONDS`), the variables `tms.config` validates and documents, so
a job's driver and its Spark tasks, which build `Storage` by URI, read the same ones.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tms.hudi.storage.requests import RequestCounts, RequestKind, record

__all__ = [
    "RETRIED",
    "RetryPolicy",
    "StorageUnavailableError",
    "call_with_retries",
    "client_options",
    "is_transient",
    "policy",
]

T = TypeVar("T")

RETRIED = RequestCounts()
"""Requests of the process sent again after a transient failure, per kind."""

TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "Throttling",
        "ThrottlingException",
        "TooManyRequests",
    }
)
"""Error codes of an answer that says: try again."""
TRANSIENT_NAMES = frozenset(
    {
        "HTTPClientError",  # botocore: connection closed, read and connect timeouts
        "EndpointConnectionError",
        "ConnectionClosedError",
        "IncompleteReadError",  # botocore: a body shorter than its Content-Length
        "IncompleteRead",  # urllib3
        "ResponseParserError",
        "ClientPayloadError",  # aiohttp: a body cut short
        "ClientConnectionError",  # aiohttp: reset, refused, disconnected
        "ServerTimeoutError",
        "FSTimeoutError",
    }
)
"""Exception classes (by name, to need no store library here) of a request that got no
whole answer."""


class StorageUnavailableError(ConnectionError):
    """A call that met only passing failures until its last try. An `OSError`, as every other
    storage failure, whatever the store library raised (botocore's and aiohttp's connection
    errors are not): the callers that answer a request with a clean 502 or fail a job's
    attempt as retryable catch `OSError`. The library's exception is its `__cause__`."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long `Storage` retries a transient failure."""

    attempts: int = 5
    """Tries of one call in all (1 = no retry)."""
    base_seconds: float = 0.2
    max_seconds: float = 5.0
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 20.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        env = os.environ if environ is None else environ
        default = cls()

        def number(name: str, value: float) -> float:
            text = env.get(f"TMS_STORAGE_{name}")
            return float(text) if text else value

        return cls(
            attempts=max(1, int(number("RETRIES", default.attempts - 1)) + 1),
            base_seconds=number("RETRY_BASE_SECONDS", default.base_seconds),
            max_seconds=number("RETRY_MAX_SECONDS", default.max_seconds),
            connect_timeout_seconds=number(
                "CONNECT_TIMEOUT_SECONDS", default.connect_timeout_seconds
            ),
            read_timeout_seconds=number("READ_TIMEOUT_SECONDS", default.read_timeout_seconds),
        )

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait before retry `attempt` (1 = the first retry): full jitter."""
        ceiling = min(self.max_seconds, self.base_seconds * 2 ** (attempt - 1))
        return (rng or random).uniform(0.0, ceiling)


def policy() -> RetryPolicy:
    """The policy of this process, read from its environment at each call (cheap), so a
    test or a job that sets the variables sees them."""
    return RetryPolicy.from_environment()


def client_options(retry: RetryPolicy) -> dict[str, Any]:
    """s3fs options: botocore's own retries off, the timeouts of the policy."""
    return {
        "config_kwargs": {
            "retries": {"total_max_attempts": 1, "mode": "standard"},
            "connect_timeout": retry.connect_timeout_seconds,
            "read_timeout": retry.read_timeout_seconds,
        }
    }


def is_transient(exc: BaseException) -> bool:
    """A failure a second identical request may not meet: the store's "try again" answers
    (5xx, throttling) and requests that got no whole answer (reset, timeout, cut body)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _transient_one(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _transient_one(exc: BaseException) -> bool:
    if isinstance(exc, FileNotFoundError | PermissionError | FileExistsError):
        return False
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if any(cls.__name__ in TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error") or {}
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        code = str(error.get("Code", ""))
        return code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)
    return False


def call_with_retries(
    kind: RequestKind,
    call: Callable[[], T],
    retry: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, repeated after a transient failure up to `retry.attempts` tries in all;
    each repeat is counted as a request of `kind` and in `RETRIED`. Only for calls that
    are safe to repeat whatever the first try did. A transient failure of the last try is
    raised as a `StorageUnavailableError` unless it is an `OSError` already."""
    attempt = 1
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if attempt >= retry.attempts:
                if isinstance(exc, OSError):
                    raise
                raise StorageUnavailableError(
                    f"storage did not answer after {attempt} tries: {type(exc).__name__}: {exc}"
                ) from exc
        sleep(retry.delay(attempt))
        attempt += 1
        record(kind)
        RETRIED.add(kind)
