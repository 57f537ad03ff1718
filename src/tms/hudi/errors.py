"""Errors `tms.hudi` raises about a table, in one module so every part of the layer can
raise them without importing `HudiTable`.

    HudiError
    ├── TableNotFoundError        no table at the base path
    └── TableRefusedError         a table the services will not touch; nothing was written
        ├── UnsupportedTableError a feature we do not handle
        └── UnsafePathError       a plan, metadata or marker names a path outside the table

A refusal is final: retrying cannot change the table, so callers report it without retrying.
"""

from __future__ import annotations

__all__ = [
    "HudiError",
    "TableNotFoundError",
    "TableRefusedError",
    "UnsafePathError",
    "UnsupportedTableError",
]


class HudiError(Exception):
    """Base of the errors `tms.hudi` raises about a table."""


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
