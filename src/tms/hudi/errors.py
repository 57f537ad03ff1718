"""Every error the table layer (`tms.hudi` and `tms.services`) raises about a table, in one
module so each part of the layer can raise them without importing the part that owns the idea.

    HudiError
    ├── TableNotFoundError          no table at the base path
    ├── TableRefusedError           a table the services will not touch; nothing was written
    │   ├── UnsupportedTableError   a feature we do not handle
    │   └── UnsafePathError         a plan, metadata or marker names a path outside the table
    ├── LogFormatError (ValueError) bytes that are not Hudi log blocks
    ├── HFileError (ValueError)     bytes that are not an HFile we can read, or a refused write
    ├── PlanNotFoundError           no pending plan of that action at that instant
    │   └── PlanCompletedError      the plan at that instant has completed already
    ├── CompactionConflictError     the timeline does not allow a compaction at that instant
    ├── InstantInFlightError        the instant's heartbeat is alive: another job runs it
    ├── PlanCancelledError          a cancellable plan was cancelled (RFC-79): it is aborted
    └── CancelRefusedError          a cancel request the plan's state does not allow

A refusal is final: retrying cannot change the table, so callers report it without retrying.
The two that are also `ValueError`s are about input (bytes) and are caught as such.
"""

from __future__ import annotations

__all__ = [
    "CancelRefusedError",
    "CompactionConflictError",
    "HFileError",
    "HudiError",
    "InstantInFlightError",
    "LockTimeoutError",
    "LogFormatError",
    "PlanCancelledError",
    "PlanCompletedError",
    "PlanNotFoundError",
    "TableNotFoundError",
    "TableRefusedError",
    "UnsafePathError",
    "UnsupportedTableError",
]


class HudiError(Exception):
    """Base of the errors the table layer raises about a table."""


class TableNotFoundError(HudiError):
    """No `hoodie.properties` under the base path."""


class TableRefusedError(HudiError):
    """The services will not touch this table as it is; nothing was written."""


class UnsupportedTableError(TableRefusedError):
    """The table uses a feature we do not handle; nothing was written."""


class UnsafePathError(TableRefusedError):
    """A path read from the table's own files would lead outside the table (or into
    `.hoodie/` where a data file is meant); the plan is refused before anything is written."""

    def __init__(self, source: str, path: str, reason: str) -> None:
        self.source = source
        self.path = path
        self.reason = reason
        super().__init__(f"{source}: {path!r} {reason}; refusing to touch it")


class LogFormatError(HudiError, ValueError):
    """Raised when bytes cannot be encoded or decoded as Hudi log blocks."""


class HFileError(HudiError, ValueError):
    """Raised when bytes cannot be read as an HFile, or an HFile write is refused (unsorted keys,
    an unsupported codec)."""


class PlanNotFoundError(HudiError):
    """No pending plan of that action at that instant (completed, or never scheduled)."""


class PlanCompletedError(PlanNotFoundError):
    """The plan at that instant has completed already (on whichever timeline holds it: the
    data table's, or its metadata table's): a retry after a lost result finds its work done."""


class CompactionConflictError(HudiError):
    """The timeline does not allow a compaction at that instant; nothing was written."""


class InstantInFlightError(HudiError):
    """The instant's heartbeat is alive: another job is running it."""


class PlanCancelledError(HudiError):
    """A cancel was requested for the plan (`.hoodie/.cancel/<instant>`, RFC-79): its
    execution stopped, and the plan is aborted once nobody runs it any more."""

    def __init__(self, instant_time: str, reason: str) -> None:
        self.instant_time = instant_time
        self.reason = reason
        super().__init__(f"plan {instant_time} was cancelled: {reason}")


class LockTimeoutError(HudiError):
    """The table lock could not be taken in time: another writer holds it."""


class CancelRefusedError(HudiError):
    """A cancel request that cannot be honoured: the plan is not cancellable, already
    completed, or not on the timeline. Nothing was written."""


class SavepointRefusedError(HudiError):
    """A savepoint that cannot be made: its instant is not a completed write, or files it
    would keep may have been cleaned already. Nothing was written."""
