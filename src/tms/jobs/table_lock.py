"""A job's `postgres` table lock: the job has no database access, so the service takes the
PostgreSQL advisory lock for the job's attempt (`POST …/table-lock`) and holds it until the
job releases it (`DELETE …/table-lock`), reports its result, or loses its lease."""

from __future__ import annotations

from tms.jobs.client import AttemptApi

__all__ = ["ServiceTableLocks"]


class ServiceTableLocks:
    """`tms.hudi.locks.AdvisoryLocks` through the job API. The service names the lock by
    the attempt's own table: a job can lock no other, so `key` is not sent."""

    def __init__(self, client: AttemptApi, *, retry_seconds: float = 0.5) -> None:
        self._client = client
        self.retry_seconds = retry_seconds

    def try_take(self, key: int) -> bool:
        return self._client.take_table_lock()

    def release(self, key: int) -> None:
        self._client.release_table_lock()
