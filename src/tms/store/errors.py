"""Typed store errors, mapped to HTTP statuses at the API boundary.

StoreError
├── NotFound              a row that should exist does not (404)
├── TableConflict         register clashes with another table's name or base path (409)
├── TableBusy             the table has a running operation, so it cannot be deleted (409)
├── OperationConflict     an instant already belongs to another operation (409)
└── TransitionRefused     the operation is not in the status the transition expects (409)
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = [
    "NotFound",
    "OperationConflict",
    "StoreError",
    "TableBusy",
    "TableConflict",
    "TransitionRefused",
]


class StoreError(Exception):
    """Base of every error the repository functions raise on purpose."""


class NotFound(StoreError):
    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"{kind} {key} not found")
        self.kind = kind
        self.key = key


class TableConflict(StoreError):
    """The db/table name or the base path is already registered to something else."""


class TableBusy(StoreError):
    """The table has a running operation; cancel it (or wait) before deleting the table."""


class OperationConflict(StoreError):
    """Another operation of the same table and action already has this instant."""


class TransitionRefused(StoreError):
    """A guarded transition matched no row: the status (or attempt) was not the expected one."""

    def __init__(
        self,
        operation_id: int,
        wanted: str,
        expected: Collection[str],
        actual: str | None,
        detail: str = "",
    ) -> None:
        shown = "|".join(sorted(expected))
        msg = f"operation {operation_id}: cannot {wanted}: status is {actual}, expected {shown}"
        super().__init__(f"{msg}{f' ({detail})' if detail else ''}")
        self.operation_id = operation_id
        self.expected = tuple(expected)
        self.actual = actual
