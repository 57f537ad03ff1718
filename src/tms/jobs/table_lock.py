"""A job's `postgres` table lock: the job has no database access, so the service takes the
PostgreSQL advisory lock for the job's attempt (`POST …/table-lock`) and holds it until the
job releases it (`DELETE …/table-lock`), reports its result, or loses its lease."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from tms.hudi.locks import advisory_lock_busy, take_within
from tms.jobs.client import JobClient

__all__ = ["ServiceTableLocks"]


class ServiceTableLocks:
    """`tms.services.table_lock.AdvisoryLocks` through the job API. The service names the
    lock by the attempt's own table: a job can lock no other."""

    def __init__(self, client: JobClient, *, retry_seconds: float = 0.5) -> None:
        self._client = client
        self._retry = retry_seconds

    @contextmanager
    def hold(self, key: int, wait_seconds: float) -> Iterator[None]:
        take_within(
            self._client.take_table_lock,
            wait_seconds,
            self._retry,
            partial(advisory_lock_busy, key),
        )
        try:
            yield
        finally:
            self._client.release_table_lock()
