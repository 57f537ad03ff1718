"""The `indexing` table service: build metadata partitions of an existing table (Hudi's RFC-45
async indexer), or drop them.

`schedule` writes the plan (`tms.hudi.metadata.indexing`): the partitions and the instant `U`
they are built up to. `execute` runs it in stages, naming each to `on_stage` as it enters it:

- build (cancellable): the latest file slices as of `U` indexed on Spark into the new
  partitions' base files (`index_build.build_partitions`), then the partitions are listed
  inflight in the table config, so writers log their updates to them from then on;
- catch-up (not cancellable): once every instant pending at that moment has ended, the
  instants completed after `U` are applied as one delta commit of log files (`catch_up`);
- complete: index definitions, the partitions listed built, the completed instant.

Anything that fails before complete is undone: the new partitions, their table config entries
and the metadata table's instants go. What becomes of the plan depends on why. A failure a
retry may get past (a lost executor, a storage error, writers still pending at the catch-up
timeout) keeps it requested, and the operation's retry runs it again. A refusal or an undo the
catch-up cannot express (a rollback or restore of a completed instant) removes it: the build
must be submitted again, planned anew. A cancel removes it too (`discard`, called by the job
once the work stopped). An inflight instant left by a crashed run is undone and run again from
its plan by the next `execute`. Other table services refuse the table while partitions are
inflight.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tms.hudi.actions import INDEXING
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.index_build import (
    IndexSpec,
    IndexWrite,
    build_partitions,
    catch_up,
    index_definitions,
    index_spec,
    native_refusals,
)
from tms.hudi.metadata.index_build.files_partition import build_files_partition, catch_up_files
from tms.hudi.metadata.indexing import (
    COLUMNS_KEY,
    VERSION_KEY,
    IndexPlan,
    abort_indexing,
    catch_up_time,
    complete_indexing,
    drop_partitions,
    ensure_schedulable,
    mark_inflight,
    partition_names,
    pending_indexing,
    read_plan,
    schedule_indexing,
)
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, PARTITION_STATS
from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.metadata.valid_instants import rolled_back_instants
from tms.hudi.properties import TableConfig
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.services.apache_hudi.indexer import hudi_refusals
from tms.services.execution import ServiceResult, move_to_inflight, pending_plan, running_plan
from tms.services.table_refusals import ensure_supported
from tms.spark_runtime.task_memory import task_memory_budget

__all__ = [
    "CatchUpTimeoutError",
    "IndexAbortedError",
    "declines",
    "discard",
    "execute",
    "pending_plans",
    "schedule",
]

DEFAULT_CATCH_UP_TIMEOUT = 600.0
"""Seconds the catch-up waits for instants pending when the partitions were listed inflight."""
POLL_SECONDS = 2.0
CAUGHT_UP_ACTIONS = (*WRITE_COMMIT_ACTIONS, Action.CLEAN)
"""Completed instants the catch-up applies: writes and the cleans that deleted files."""
WAITED_ACTIONS = (*WRITE_COMMIT_ACTIONS,)
"""Requested instants waited for: writers' (a requested table service plan has not started;
tms's services refuse the table while the build is in flight)."""
Stage = Callable[[str], None]

BUILD = "build"
CATCH_UP = "catch-up"
COMPLETE = "complete"
HOLD_STAGES = frozenset({CATCH_UP, COMPLETE})
"""Stages a cancel request no longer stops: by then the partitions are built and writers log
to them; finishing costs a short catch-up, stopping would throw the build away."""


class IndexAbortedError(RuntimeError):
    """The build was aborted and left no trace; scheduling it again may succeed."""


class CatchUpTimeoutError(RuntimeError):
    """Instants pending at the mark were still pending at the timeout: the build is undone
    but its plan stays, so a retry runs it again once those writers are done."""


def schedule(table: HudiTable, partitions: str | Sequence[str] = ()) -> str | None:
    """Write the plan building `partitions` and return its instant. Refusals raise
    `UnsupportedTableError` before anything is written."""
    names = partition_names(partitions)
    ensure_supported(table)
    timeline = table.timeline()
    ensure_schedulable(table.storage, table.config, timeline, names)
    spec = index_spec(table, timeline, names)
    stats = {
        p: {COLUMNS_KEY: ",".join(spec.columns), VERSION_KEY: spec.version.name}
        for p in spec.partitions
        if p in (COLUMN_STATS, PARTITION_STATS)
    }
    return schedule_indexing(table.storage, spec.partitions, stats)


def drop(table: HudiTable, partitions: str | Sequence[str] = ()) -> dict[str, Any]:
    """Drop `partitions` from the metadata table at once, with no plan (the service's direct
    work): dropping `files` drops the whole metadata table. Its figures: what went."""
    names = partition_names(partitions)
    drop_partitions(table.storage, names)
    return {"dropped": ",".join(names)}


def discard(table: HudiTable, instant_time: str, heartbeat_interval: float = 0.0) -> None:
    """What a cancelled build leaves: nothing. Its plan goes, with whatever a run stopped
    between stages left (a failed run keeps its plan for the retry)."""
    instant = table.timeline().get(instant_time)
    if instant is None or not instant.is_pending or instant.action is not Action.INDEXING:
        return
    plan = read_plan(table.timeline(), instant)
    abort_indexing(table.storage, instant_time, plan.partitions)


def declines(
    table: HudiTable, planning: Mapping[str, Any] | None, instant_time: str | None
) -> tuple[list[str], list[str]]:
    """Why tms's own build and Hudi's decline the partitions an operation builds (those its
    planning names, else those of its pending plan): (native's reasons, Hudi's reasons). A
    drop, and a plan no longer pending, are declined by neither: tms's own code runs them."""
    partitions: list[str] = []
    if planning is not None and not planning.get("drop"):
        partitions = partition_names(planning.get("partitions") or ())
    elif planning is None and instant_time is not None:
        timeline = table.timeline()
        instant = timeline.get(instant_time)
        if instant is not None and instant.is_pending and instant.action is Action.INDEXING:
            partitions = list(read_plan(timeline, instant).partitions)
    if not partitions:
        return [], []
    return native_refusals(table, partitions), hudi_refusals(table, partitions)


def pending_plans(table: HudiTable) -> list[str]:
    return [i.requested_time for i in pending_indexing(table.timeline())]


def _reloaded(table: HudiTable) -> HudiTable:
    """The table with its config as on storage now (the build's steps change it)."""
    return dataclasses.replace(table, config=TableConfig.load(table.storage))


def _add(result: ServiceResult, write: IndexWrite) -> None:
    result.file_groups += write.file_groups
    result.files_written += write.files_written
    result.bytes_written += write.bytes_written
    result.records_written += write.records_written


def execute(
    spark: Any,
    table: HudiTable,
    instant_time: str,
    *,
    heartbeat_interval: float = 60.0,
    on_stage: Stage | None = None,
    catch_up_timeout: float = DEFAULT_CATCH_UP_TIMEOUT,
) -> ServiceResult:
    """Run the pending `indexing` plan at `instant_time` on Spark. A live heartbeat means
    another job runs it; an inflight instant left by a crashed run is recovered under the
    heartbeat (`_recover`), and the instant moves to inflight once the table still allows the
    build (`_run`)."""
    started = time.monotonic()
    stage: Stage = on_stage or (lambda _: None)
    instant = pending_plan(table, instant_time, (Action.INDEXING,))
    result = ServiceResult(action=INDEXING, instant=instant_time)
    busy = f"indexing {instant_time} is being run by another job (live heartbeat)"
    with (
        running_plan(
            table.storage, instant_time, result, heartbeat_interval, busy=busy, started=started
        ) as run,
        run.heartbeating(),
    ):
        plan = read_plan(table.timeline(), instant)
        if instant.state is State.INFLIGHT:
            instant = _recover(table, instant, plan, result, stage)
        if instant.state is State.REQUESTED:
            _run(spark, _reloaded(table), instant, plan, result, stage, catch_up_timeout)
    return result


def _recover(
    table: HudiTable, instant: Instant, plan: IndexPlan, result: ServiceResult, stage: Stage
) -> Instant:
    """An inflight instant left by a crashed run: completed when its partitions were already
    listed built (only the instant was left to write), else aborted back to its plan."""
    config = TableConfig.load(table.storage)
    if all(p in config.metadata_partitions for p in plan.partitions):
        stage(COMPLETE)
        spec = index_spec(_reloaded(table), table.timeline(), plan.partitions)
        return complete_indexing(
            table.storage,
            instant,
            plan,
            plan.up_to,
            index_definitions(spec, table.config.table_version),
        )
    abort_indexing(table.storage, instant.requested_time, plan.partitions, keep_plan=True)
    result.rolled_back.append(instant.requested_time)
    return Instant(instant.requested_time, Action.INDEXING, State.REQUESTED)


def _run(
    spark: Any,
    table: HudiTable,
    requested: Instant,
    plan: IndexPlan,
    result: ServiceResult,
    stage: Stage,
    catch_up_timeout: float,
) -> None:
    storage, instant_time, up_to = table.storage, requested.requested_time, plan.up_to
    try:  # a plan the table no longer allows goes too: it would hold off every other build
        ensure_supported(table)
        timeline = table.timeline()
        spec = index_spec(table, timeline, plan.partitions)
        inflight = move_to_inflight(table, requested)
        stage(BUILD)
        if spec.partitions == (FILES,):
            built = build_files_partition(table, timeline, up_to, instant_time)
        else:
            built = build_partitions(
                spark,
                table,
                spec,
                as_of=up_to,
                instant_time=instant_time,
                timeline=timeline,
                memory_budget=task_memory_budget(spark),
            )
        _add(result, built)
        seen = _completed_times(timeline)
        config = mark_inflight(storage, spec.partitions)
        marked = Timeline.load(storage, config)
        stage(CATCH_UP)
        caught_up_to = _catch_up(
            spark,
            HudiTable(storage, config),
            spec,
            marked,
            up_to,
            instant_time,
            seen | _completed_times(marked),
            result,
            catch_up_timeout,
        )
    except Exception as exc:
        keep_plan = not isinstance(exc, (UnsupportedTableError, IndexAbortedError))
        abort_indexing(storage, instant_time, plan.partitions, keep_plan=keep_plan)
        raise
    except BaseException:
        abort_indexing(storage, instant_time, plan.partitions)
        raise
    stage(COMPLETE)
    complete_indexing(
        storage, inflight, plan, caught_up_to, index_definitions(spec, table.config.table_version)
    )


def _completed_times(timeline: Timeline) -> set[str]:
    return {i.requested_time for i in timeline.instants if i.is_completed}


def _catch_up(
    spark: Any,
    table: HudiTable,
    spec: IndexSpec,
    marked: Timeline,
    up_to: str,
    instant_time: str,
    seen_completed: set[str],
    result: ServiceResult,
    timeout: float,
) -> str:
    """Wait for the instants pending at the mark, then apply every instant completed after
    `U`; the instant caught up to (`U` when there was none)."""
    waited = [
        i.requested_time
        for i in marked.instants
        if i.is_pending
        and i.requested_time != instant_time
        and (i.state is State.INFLIGHT or marked.origin_action(i) in WAITED_ACTIONS)
    ]
    timeline = _wait_for(table, waited, timeout)
    _refuse_undone(timeline, up_to, seen_completed | _completed_times(timeline))
    completed = [
        i
        for i in timeline.completed(CAUGHT_UP_ACTIONS)
        if i.requested_time > up_to and i.requested_time != instant_time
    ]
    if not completed:
        return up_to
    until = completed[-1].requested_time
    logged = _logged_by_writers(table, spec.partitions, up_to)
    instants = [i for i in completed if i.requested_time not in logged]
    if not instants:
        return until
    if spec.partitions == (FILES,):
        _add(result, catch_up_files(table, timeline, instants))
        return until
    write = catch_up(
        spark,
        table,
        spec,
        instants,
        since=up_to,
        until=until,
        instant_time=catch_up_time(instant_time),
        timeline=timeline,
        memory_budget=task_memory_budget(spark),
    )
    _add(result, write)
    return until


def _logged_by_writers(table: HudiTable, partitions: Sequence[str], up_to: str) -> set[str]:
    """Instants whose writer logged to the new partitions itself (its metadata delta commit
    wrote files there): applying them again would count column stats twice, since Hudi
    merges two stats of one file by adding their counts."""
    storage = metadata_storage(table.storage)
    md_timeline = Timeline.load(storage, TableConfig.load(storage))
    return {
        i.requested_time
        for i in md_timeline.completed((Action.DELTA_COMMIT,))
        if i.requested_time > up_to  # only instants after `U` are caught up
        and any(p in partitions for p, _ in md_timeline.commit_metadata(i).iter_write_stats())
    }


def _wait_for(table: HudiTable, pending: list[str], timeout: float) -> Timeline:
    """The timeline once none of `pending` is pending (rolled back counts as ended)."""
    deadline = time.monotonic() + timeout
    while True:
        timeline = table.timeline()
        left = [t for t in pending if (i := timeline.get(t)) is not None and i.is_pending]
        if not left:
            return timeline
        if time.monotonic() >= deadline:
            raise CatchUpTimeoutError(
                f"instants {', '.join(left)} were still pending after {timeout:g}s; "
                "the index build is undone, its plan kept for a retry"
            )
        time.sleep(POLL_SECONDS)


def _refuse_undone(timeline: Timeline, up_to: str, completed: set[str]) -> None:
    """A restore, or a rollback of a completed instant after `U`'s build started, changed
    what the new partitions hold in a way a catch-up of later instants cannot express."""
    for undo in timeline.completed((Action.ROLLBACK, Action.RESTORE)):
        if undo.requested_time <= up_to:
            continue
        if undo.action is Action.RESTORE:
            raise IndexAbortedError(
                f"restore {undo.requested_time} ran during the index build; it is aborted"
            )
        targets = rolled_back_instants(timeline, undo)
        done = sorted(t for t in targets if t <= up_to or t in completed)
        if done:
            raise IndexAbortedError(
                f"rollback {undo.requested_time} undid completed instant(s) {', '.join(done)} "
                "during the index build; it is aborted"
            )
