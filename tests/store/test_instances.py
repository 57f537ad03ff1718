from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from tms.store import (
    heartbeat_instance,
    list_instances,
    new_instance_id,
    prune_instances,
    register_instance,
)


def test_instances_register_beat_and_prune(session: Session) -> None:
    me = new_instance_id()
    first = register_instance(session, me, host="h1", pid=42)
    assert (first.id, first.host, first.pid) == (me, "h1", 42)
    assert register_instance(session, me, host="h1", pid=42).id == me  # idempotent
    assert heartbeat_instance(session, me)
    assert not heartbeat_instance(session, "nobody")

    register_instance(session, "old", host="h2", pid=1)
    session.execute(
        text("UPDATE instance SET heartbeat_at = now() - interval '1 hour' WHERE id = 'old'")
    )
    assert [i.id for i in list_instances(session, alive_within=timedelta(minutes=1))] == [me]
    assert prune_instances(session, silent_for=timedelta(minutes=10)) == 1
    assert [i.id for i in list_instances(session)] == [me]
