"""A registered table read from storage for a request: on a `BlockingCalls` thread, its
storage requests counted, and storage's own error texts kept in the log, never sent back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from tms.api.errors import ApiError
from tms.blocking_calls import BlockingCalls
from tms.http.storage_calls import call_storage
from tms.hudi.errors import (
    LockTimeoutError,
    SavepointRefusedError,
    TableNotFoundError,
    TableRefusedError,
)
from tms.hudi.locks import LockSpec
from tms.hudi.storage.requests import counting
from tms.hudi.table import HudiTable
from tms.observe import record_storage_requests
from tms.store import get_table

__all__ = ["read_registered_table", "read_table"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def read_table(
    base_path: str,
    options: dict[str, Any],
    name: str,
    kind: str,
    read: Callable[[HudiTable], T],
    lock: LockSpec | None = None,
) -> T:
    """`read` applied to the table at `base_path` (opened with `lock`, the one its writers
    use, for a change); `kind` names the read in `tms_storage_requests_total` and in the 502
    (`the timeline`, `the file_groups`). Refuses with 404 when no table is there, 409 for one
    tms does not read, a refused savepoint or a lock held past the wait, 502 when storage
    fails."""
    what = kind.replace("_", " ")
    try:
        with counting() as requests:
            try:
                return read(HudiTable.open(base_path, storage_options=options, lock=lock))
            finally:
                record_storage_requests(name, kind, requests.as_dict())
    except ApiError:
        raise
    except SavepointRefusedError as exc:
        raise ApiError.conflict("savepoint_refused", str(exc)) from None
    except LockTimeoutError as exc:
        raise ApiError.conflict(
            "table_locked", f"the table's writers hold its lock: {exc}; retry later"
        ) from None
    except TableNotFoundError as exc:
        log.warning("%s of %s: %s", what, base_path, exc)
        raise ApiError(404, "not_on_storage", f"no Hudi table on storage at {base_path}") from None
    except TableRefusedError as exc:
        raise ApiError.conflict("unsupported_table", str(exc)) from exc
    except Exception as exc:
        log.warning("%s of %s: cannot read storage: %s", what, base_path, exc)
        raise ApiError(
            502, "storage_error", f"the {what} at {base_path} could not be read from storage"
        ) from None


def read_registered_table(
    session: Session,
    calls: BlockingCalls,
    table_id: int,
    kind: str,
    read: Callable[[HudiTable], T],
) -> T:
    """`read_table` of registered table `table_id` on a `calls` thread (404 when it is not
    registered); no transaction is held open while storage is read."""
    found = get_table(session, table_id)
    base_path, options, name = found.base_path, dict(found.storage_options), found.qualified_name
    session.rollback()
    return call_storage(calls, partial(read_table, base_path, options, name, kind, read))
