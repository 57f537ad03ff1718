"""A new due operation wakes a waiting scheduler at once; polling stays the fallback."""

from __future__ import annotations

import threading
import time

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import make_op, make_table
from tms.scheduler.wakeup import Wakeup
from tms.store import session_scope


def test_a_submitted_operation_wakes_the_wait(
    engine: Engine, factory: sessionmaker[Session]
) -> None:
    wakeup = Wakeup(engine)
    stop = threading.Event()
    assert wakeup.wait(0.3, stop) is False  # nothing due: the whole interval passes

    def submit_soon() -> None:
        time.sleep(0.3)
        with session_scope(factory) as s:
            make_op(s, make_table(s))

    submitter = threading.Thread(target=submit_soon)
    started = time.monotonic()
    submitter.start()
    woken = wakeup.wait(20.0, stop)
    waited = time.monotonic() - started
    submitter.join()
    wakeup.close()
    assert woken and waited < 5.0, waited


def test_without_a_database_the_wait_is_a_plain_sleep() -> None:
    stop = threading.Event()
    started = time.monotonic()
    assert Wakeup(None).wait(0.2, stop) is False
    assert time.monotonic() - started >= 0.2
    stop.set()
    assert Wakeup(None).wait(5.0, stop) is False  # a stop request ends the wait at once
