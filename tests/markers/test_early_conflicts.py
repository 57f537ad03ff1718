"""Early conflict detection (RFC-56) on marker creation, as Hudi's timeline-server-based
strategy decides it: a writer whose request carries `basepath` gets `false` (which its client
turns into `HoodieEarlyConflictDetectionException`) for a marker on a file group an earlier
live writer marked, or that a commit completed since it started changed; and every marker
after that. Our compaction and clustering see the served markers too."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import batch
from tests.markers.conftest import Serve, Table, create, register
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, next_time, request, transition
from tms.markers import MarkerHandler
from tms.metrics import MARKER_CONFLICTS
from tms.services.conflicts import ConflictCheck, WriteConflictError, find_conflicts
from tms.services.execution import conflict_in_task
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter


def conflicts_counted() -> float:
    return MARKER_CONFLICTS._value.get()


def marker(file_id: str, instant: str, kind: str = "CREATE", partition: str = "") -> str:
    prefix = f"{partition}/" if partition else ""
    if kind == "APPEND":
        return f"{prefix}.{file_id}_{instant}.log.1_0-1-0.marker.APPEND"
    return f"{prefix}{file_id}_0-1-0_{instant}.parquet.marker.{kind}"


def writer_instants(table: Table, count: int) -> list[str]:
    times = [new_instant_time(HudiTable.open(table.base_path).timeline().instants)]
    while len(times) < count:
        times.append(next_time(times[-1]))
    return times


def test_the_second_of_two_concurrent_writers_aborts_at_its_first_conflicting_marker(
    serve: Serve, table: Table
) -> None:
    first, second = writer_instants(table, 2)
    table.begin(first, second)
    storage = HudiTable.open(table.base_path).storage
    for ts in (first, second):
        heartbeat.beat(storage, ts)
    shared = "aaaaaaaa-0000-0000-0000-000000000001-0"
    first_marked = threading.Event()
    results: dict[str, list[bool]] = {first: [], second: []}
    counted = conflicts_counted()

    with serve() as client:

        def write(ts: str, files: list[tuple[str, str]]) -> None:
            for file_id, kind in files:
                if ts == second and file_id == shared:
                    assert first_marked.wait(30)
                answer = create(
                    client, table.marker_dir(ts), marker(file_id, ts, kind), table.base_path
                )
                results[ts].append(answer)
                if ts == first and file_id == shared:
                    first_marked.set()

        mine = [(f"bbbbbbbb-0000-0000-0000-00000000000{i}-0", "CREATE") for i in range(3)]
        writers = [
            threading.Thread(target=write, args=(first, [(shared, "CREATE"), *mine])),
            threading.Thread(
                target=write,
                args=(
                    second,
                    [
                        ("cccccccc-0000-0000-0000-000000000001-0", "CREATE"),
                        (shared, "APPEND"),  # a log file of the same file group
                        ("cccccccc-0000-0000-0000-000000000002-0", "CREATE"),
                    ],
                ),
            ),
        ]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(60)
        assert results[first] == [True] * 4, "the earlier writer goes on"
        assert results[second] == [True, False, False], "aborted at its first conflict, and after"
        assert conflicts_counted() - counted == 1

        # the earlier writer may mark what the later one marked: it does not yield to it
        later = "cccccccc-0000-0000-0000-000000000001-0"
        assert create(client, table.marker_dir(first), marker(later, first), table.base_path)
        # without `basepath` (detection off) nothing is checked
        assert create(client, table.marker_dir(second), marker("dddddddd-1", second)) is True


def test_a_burst_of_markers_shares_detection_runs_and_a_later_marker_gets_its_own(
    serve: Serve, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = writer_instants(table, 2)
    table.begin(first, second)
    storage = HudiTable.open(table.base_path).storage
    for ts in (first, second):
        heartbeat.beat(storage, ts)
    shared = "ffffffff-0000-0000-0000-000000000001-0"
    burst = [f"99999999-0000-0000-0000-0000000000{i:02d}-0" for i in range(12)]
    runs = 0
    run = MarkerHandler._run_detection

    async def gated_run(self: MarkerHandler, table_: Any, state: Any) -> Any:
        """The burst's first run waits until every marker of the burst asked (a slow
        storage), so the others queue behind it."""
        nonlocal runs
        runs += 1
        if state.instant_time == second and runs == 1:
            asked = self._detections[(table_.base_path, second)]
            deadline = time.monotonic() + 60
            while asked.asked < len(burst):
                assert time.monotonic() < deadline, "the burst never arrived"
                await asyncio.sleep(0.01)
        return await run(self, table_, state)

    monkeypatch.setattr(MarkerHandler, "_run_detection", gated_run)
    with serve() as client:
        assert create(client, table.marker_dir(first), marker(shared, first), table.base_path)
        runs = 0
        with ThreadPoolExecutor(len(burst)) as pool:
            answers = list(
                pool.map(
                    lambda f: create(
                        client, table.marker_dir(second), marker(f, second), table.base_path
                    ),
                    burst,
                )
            )
        assert answers == [True] * len(burst)
        # The first run covered the first marker only; the eleven that asked meanwhile
        # share the one run after it.
        assert runs == 2, "markers asking meanwhile share the next run"
        late = create(client, table.marker_dir(second), marker(shared, second), table.base_path)
        assert late is False, "a marker after the burst gets a run of its own"


def test_a_dead_writer_or_a_table_service_does_not_make_a_writer_abort(
    serve: Serve, table: Table
) -> None:
    dead, compaction, writer = writer_instants(table, 3)
    table.begin(dead, writer)
    hudi = HudiTable.open(table.base_path)
    for ts in (dead, compaction, writer):
        heartbeat.beat(hudi.storage, ts)
    old = time.time() - 600  # past the 120 s tolerance
    os.utime(Path(table.base_path) / ".hoodie" / ".heartbeat" / dead, (old, old))
    request(hudi.storage, hudi.config, compaction, Action.COMPACTION)
    shared = "eeeeeeee-0000-0000-0000-000000000001-0"
    with serve() as client:
        assert create(client, table.marker_dir(dead), marker(shared, dead), table.base_path)
        assert create(
            client, table.marker_dir(compaction), marker(shared, compaction), table.base_path
        )
        assert create(
            client, table.marker_dir(writer), marker(shared, writer, "MERGE"), table.base_path
        ), "neither a writer with a stale heartbeat nor a pending compaction counts"
    with serve(marker_heartbeat_tolerance_seconds=3600) as client:
        late = next_time(writer)
        table.begin(late)
        heartbeat.beat(hudi.storage, late)
        answer = create(client, table.marker_dir(late), marker(shared, late), table.base_path)
        assert answer is False, "alive within a longer tolerance: it counts"


@pytest.mark.parametrize("table_version", [6, 8])
def test_a_commit_completed_after_the_writer_started_on_its_file_group_aborts_it(
    serve: Serve, tmp_path: Path, factory: sessionmaker[Session], table_version: int
) -> None:
    """Layout 1 (version 6) records no completion time: a commit requested after the writer
    started; layout 2 (version 8) compares completion times. A commit that completed before
    the writer started is no conflict."""
    base = str(tmp_path / "t")
    writer = HudiWriter(
        create_table(
            base,
            "t",
            record_key_fields=["id"],
            ordering_field="ts",
            table_version=table_version,
        )
    )
    writer.insert(batch(range(20), ts=1))
    register(factory, base, "t")
    table = Table(base, writer)
    (partition, file_id), *_ = table.file_groups()
    (started,) = writer_instants(table, 1)
    table.begin(started)
    heartbeat.beat(HudiTable.open(table.base_path).storage, started)
    with serve() as client:
        before = marker(file_id, started, "APPEND", partition=partition)
        assert create(client, table.marker_dir(started), before, table.base_path) is True
        committed = table.writer.upsert(batch(range(5), ts=2))  # updates that file group
        assert committed > started
        mine = marker(file_id, started, "MERGE", partition=partition)
        assert create(client, table.marker_dir(started), mine, table.base_path) is False
        assert create(client, table.marker_dir(started), mine) is True, (
            "without detection the marker is created"
        )


def test_our_compaction_and_clustering_see_a_writers_served_markers(
    serve: Serve, table: Table
) -> None:
    """`tms.services.conflicts` (run by our jobs before each file group and before
    completing) finds a writer in flight from the `MARKERS<n>` files the server wrote."""
    (partition, file_id), *_ = table.file_groups()
    hudi = HudiTable.open(table.base_path)
    plan, ts = writer_instants(table, 2)
    requested = request(hudi.storage, hudi.config, ts, Action.DELTA_COMMIT)
    transition(hudi.storage, hudi.config, requested, State.INFLIGHT)
    heartbeat.beat(hudi.storage, ts)
    with serve() as client:
        name = marker(file_id, ts, "MERGE", partition=partition)
        assert create(client, table.marker_dir(ts), name) is True
    assert not list((Path(table.base_path) / ".hoodie" / ".temp" / ts).rglob("*.marker.*"))
    (conflict,) = find_conflicts(hudi, plan, {(partition, file_id)}, any_file=False)
    assert conflict.in_flight and conflict.instant == ts
    assert find_conflicts(hudi, plan, {(partition, "other-0")}, any_file=True) == []

    # a task of a plan that is not cancellable yields before writing its file group
    groups = frozenset({(partition, file_id)})
    check = ConflictCheck(
        table.base_path, plan, groups, any_file=False, cancellable=False, lock=hudi.lock
    )
    with pytest.raises(WriteConflictError, match=f"being written by instant {ts}") as failed:
        conflict_in_task(check)
    assert failed.value.retryable, "the writer may be done by the next attempt"
    heartbeat.stop_heartbeat(hudi.storage, ts)  # the writer is gone
    assert conflict_in_task(check) is False
