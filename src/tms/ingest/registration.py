"""The base path a table is registered at, and whether storage shows a table there.

Used by `POST /v1/tables` and RFC-43 register (`tms.api.routes.tables.register_body`), the
Hudi client's REGISTER/REQUEST and the commit callback's auto-registration before they
register (`tms.application.register`), so all four treat a table alike: every base path is
normalized and checked against the allowed schemes and prefixes (`checked_base_path`) before
it is stored, compared or opened; a local one is then taken with its symlinks followed
(`located_base_path`), on the storage threads (a mounted file system may hang), so the
allow-list and a callback key's scope judge the folder the path really reaches, and that
folder is the table's one row.
"""

from __future__ import annotations

from functools import partial

from tms.base_path import BasePathError, check_base_path, parse
from tms.blocking_calls import BlockingCalls
from tms.config import Settings
from tms.http.errors import ApiError
from tms.http.storage_calls import call_storage
from tms.ingest.probe import Seen, TableState

__all__ = [
    "checked_base_path",
    "is_local",
    "located_base_path",
    "require_table",
]


def checked_base_path(
    settings: Settings, raw: str, field: str, *, follow_links: bool = False
) -> str:
    """`raw` normalized, if the settings allow it; else 422 naming `field` and saying why.
    With `follow_links` (which reads the file system) a local path is judged, and returned,
    with its symlinks followed."""
    try:
        return check_base_path(
            raw,
            schemes=settings.allowed_schemes,
            prefixes=settings.allowed_path_prefixes,
            follow_links=follow_links,
        )
    except BasePathError as exc:
        raise ApiError.invalid(field, str(exc)) from None


def is_local(base_path: str) -> bool:
    """A checked base path on this machine's (or a mounted) file system."""
    return parse(base_path).local


def located_base_path(settings: Settings, calls: BlockingCalls, raw: str, field: str) -> str:
    """The base path a table at `raw` is stored and compared as: checked as spelled, then,
    on local storage, with its symlinks followed (read on a storage thread: 504/503 when
    the file system hangs) and checked again; 422 naming `field` when either check fails."""
    base_path = checked_base_path(settings, raw, field)
    if not is_local(base_path):
        return base_path
    return call_storage(
        calls, partial(checked_base_path, settings, base_path, field, follow_links=True)
    )


def require_table(seen: Seen, field: str) -> None:
    """Refuse to register what storage shows is no Hudi table, or cannot show at all."""
    if seen.state is TableState.ABSENT:
        raise ApiError.invalid(
            field,
            "not a Hudi table: .hoodie/hoodie.properties is missing "
            "(register with ?pending=true a table that will be created)",
        )
    if seen.state is TableState.UNREADABLE:
        raise ApiError(
            502,
            "storage_error",
            f"{field}: the table's storage could not be read "
            "(register with ?pending=true to skip the check)",
            field=field,
        )
