"""Storage requests counted per kind, because on an object store each one costs money and time.

`Storage` records, for every call, the requests that call issues on an object store (S3's
billing classes: LIST, HEAD, GET, PUT, DELETE), whatever the filesystem underneath: the counts
of a piece of work on local disk are what it would cost on S3. A caller reads the counts of
one piece of work (a notification, a compaction) with `counting()`; `TOTAL` holds every
request of the process, for a metrics export.

Counters follow the `contextvars` context: threads started with `threading.Thread` (the
heartbeat) and Spark executors count only into `TOTAL` of their own process.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "LIST_PAGE_SIZE",
    "TOTAL",
    "RequestCounts",
    "RequestKind",
    "counting",
    "delete_requests",
    "list_requests",
    "put_requests",
    "record",
]

LIST_PAGE_SIZE = 1000
"""Keys one LIST (ListObjectsV2) or one batch DELETE (DeleteObjects) returns or removes."""
MULTIPART_THRESHOLD = 100 * 2**20
MULTIPART_CHUNK = 50 * 2**20
"""s3fs writes an object of at least twice its 50 MiB chunk as a multipart upload."""


class RequestKind(enum.StrEnum):
    LIST = "LIST"
    HEAD = "HEAD"
    GET = "GET"
    PUT = "PUT"
    DELETE = "DELETE"


class RequestCounts:
    """Requests per kind; safe to add to from several threads."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(RequestKind, 0)
        self._lock = threading.Lock()

    def add(self, kind: RequestKind, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def __getitem__(self, kind: RequestKind) -> int:
        return self._counts[kind]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """Every kind with its count, zeros included (stable keys for reports and metrics)."""
        with self._lock:
            return {kind.value: count for kind, count in self._counts.items()}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"RequestCounts({shown})"


TOTAL = RequestCounts()
_ACTIVE: ContextVar[tuple[RequestCounts, ...]] = ContextVar("storage_request_counts", default=())


@contextmanager
def counting() -> Iterator[RequestCounts]:
    """Count the storage requests made inside the block (nested blocks count in each)."""
    counts = RequestCounts()
    token = _ACTIVE.set((*_ACTIVE.get(), counts))
    try:
        yield counts
    finally:
        _ACTIVE.reset(token)


def record(kind: RequestKind, n: int = 1) -> None:
    """Count `n` requests of one kind in `TOTAL` and every open `counting()` block."""
    if n <= 0:
        return
    TOTAL.add(kind, n)
    for counts in _ACTIVE.get():
        counts.add(kind, n)


def list_requests(entries: int) -> int:
    """LISTs to read `entries` keys: one per page, and one for an empty listing."""
    return max(1, math.ceil(entries / LIST_PAGE_SIZE))


def delete_requests(files: int) -> int:
    """DELETEs (DeleteObjects batches) to remove `files` objects."""
    return math.ceil(files / LIST_PAGE_SIZE)


def put_requests(size: int) -> int:
    """PUT-class requests to write one object: one PUT, or a multipart upload's create,
    parts and complete."""
    if size < MULTIPART_THRESHOLD:
        return 1
    return math.ceil(size / MULTIPART_CHUNK) + 2
