"""A plan rolled back under its execution (a Hudi writer allowing updates into pending
clusterings rolls them back on conflict) is a conflict of its own: the conflict check under
the table lock refuses to complete it, whoever's writes it would otherwise hide."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.test_clustering import group_target, small_files_table
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import State
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.transitions import delete_pending, new_instant_time, transition
from tms.services.clustering.execute import schedule_clustering
from tms.services.conflicts import ConflictCheck, PlanRolledBackError, find_conflicts
from tms.services.execution import resolve_conflicts


@pytest.mark.parametrize("table_version", [6, 9])
def test_a_plan_gone_from_the_timeline_under_its_execution_must_not_complete(
    tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=table_version)
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base))
    assert instant is not None
    plan = table.timeline().get(instant)
    assert plan is not None
    inflight = transition(table.storage, table.config, plan, State.INFLIGHT)
    groups = frozenset(
        (s["partitionPath"], s["fileId"])
        for g in table.timeline().clustering_plan(inflight)["inputGroups"]
        for s in g["slices"]
    )
    assert find_conflicts(table, instant, groups, any_file=True) == []

    # Hudi's writer rolls the plan back: a rollback instant naming it, the plan's files gone
    rollback_time = new_instant_time(table.timeline().instants)
    rollback = RollbackInstant(
        table.storage, table.config, rollback_time, (instant, inflight.action), {}
    )
    rollback.start()
    delete_pending(table.storage, table.config, inflight)
    rollback.complete()
    with pytest.raises(PlanRolledBackError, match=f"plan {instant} left the timeline"):
        find_conflicts(table, instant, groups, any_file=True)
    check = ConflictCheck(base, instant, groups, any_file=True, cancellable=True, lock=table.lock)
    with pytest.raises(PlanRolledBackError, match=f"rollback {rollback_time} rolled it back"):
        resolve_conflicts(table, check, wait=False)
    # a plan that is not on the timeline and that no rollback names is not judged
    assert find_conflicts(table, rollback_time + "1", groups, any_file=True) == []
