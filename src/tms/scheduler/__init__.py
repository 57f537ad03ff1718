"""The scheduler: leases, claiming, launching through engines, retries with backoff."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tms.engines.engine_names import default_registry
from tms.scheduler.loop import Scheduler, TickReport
from tms.store import new_instance_id, register_instance, session_scope

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from tms.config import Settings
    from tms.engines.engine_names import EngineRegistry
    from tms.store import TableLocks

__all__ = ["Scheduler", "TickReport", "create_scheduler", "start_scheduler"]


def create_scheduler(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    instance_id: str | None = None,
    engines: EngineRegistry | None = None,
    table_locks: TableLocks | None = None,
) -> Scheduler:
    """A scheduler for this process, its instance registered (what `tms serve` runs)."""
    instance_id = instance_id or new_instance_id()
    with session_scope(session_factory) as session:
        register_instance(session, instance_id)
    return Scheduler(
        settings,
        session_factory,
        engines or default_registry(settings),
        instance_id,
        table_locks=table_locks,
    )


def start_scheduler(scheduler: Scheduler, stop_event: threading.Event) -> threading.Thread:
    """Run `scheduler.run_forever(stop_event)` in a daemon thread; set the event, then join
    the thread, to stop it (running jobs are left to their leases)."""
    thread = threading.Thread(
        target=scheduler.run_forever, args=(stop_event,), name="tms-scheduler", daemon=True
    )
    thread.start()
    return thread
