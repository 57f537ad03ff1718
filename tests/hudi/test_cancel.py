"""Cancellable plans on the table (RFC-79): the flag, `request_cancel`, `execute_cancel`, the
aborted state, and what readers see afterwards (hudi-rs: the same rows and file slices)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from tests import oracle
from tests.services.test_clustering import group_target, small_files_table

from tms.hudi.errors import CancelRefusedError, InstantInFlightError
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import Action, Instant, State, instant_file_name, parse_instant_file
from tms.services.clustering.execute import schedule_clustering
from tms.services.compaction.execute import schedule_compaction
from tms.services.plan_cancel import execute_cancel, request_cancel


@pytest.mark.parametrize(
    ("name", "action"),
    [
        ("20260101000000000.clustering.aborted", Action.CLUSTERING),
        ("20260101000000000.replacecommit.aborted", Action.REPLACE_COMMIT),
        ("20260101000000000.compaction.aborted", Action.COMPACTION),
    ],
)
def test_an_aborted_instant_file_is_a_terminal_state(name: str, action: Action) -> None:
    instant = parse_instant_file(name)
    assert instant == Instant("20260101000000000", action, State.ABORTED)
    assert instant.is_aborted and not instant.is_pending and not instant.is_completed
    assert instant_file_name(instant, 1) == instant_file_name(instant, 2) == name


@pytest.fixture(params=[6, 9], ids=["v6", "v9"])
def clustered(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A merge-on-read table with a clustering plan scheduled (not yet run)."""
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=request.param)
    instant = schedule_clustering(HudiTable.open(base), target_file_size=group_target(base))
    assert instant is not None
    return base, instant


def test_clustering_plans_are_cancellable_and_compaction_plans_are_not_by_default(
    tmp_path: Path,
) -> None:
    base = small_files_table(tmp_path / "mor", MERGE_ON_READ, rows=240, table_version=9)
    table = HudiTable.open(base)
    compaction = schedule_compaction(table)
    assert compaction is not None
    timeline = table.timeline()
    instant = timeline.get(compaction)
    assert instant is not None and not cancel_requests.is_cancellable(timeline, instant)
    with pytest.raises(CancelRefusedError, match="is not cancellable"):
        request_cancel(table, compaction)
    assert not cancel_requests.is_cancel_requested(table.storage, compaction)

    cow = small_files_table(tmp_path / "cow", COPY_ON_WRITE, rows=240, table_version=9)
    table = HudiTable.open(cow)
    clustering = schedule_clustering(table, target_file_size=group_target(cow))
    assert clustering is not None
    timeline = table.timeline()
    planned = timeline.get(clustering)
    assert planned is not None and cancel_requests.is_cancellable(timeline, planned)
    assert timeline.clustering_plan(planned)["extraMetadata"] == {"cancellable": "true"}


def test_a_submit_may_make_a_compaction_cancellable_and_a_clustering_not(tmp_path: Path) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=6)
    table = HudiTable.open(base)
    compaction = schedule_compaction(table, cancellable=True)
    cow = small_files_table(tmp_path / "cow", COPY_ON_WRITE, rows=240, table_version=6)
    clustering = schedule_clustering(
        HudiTable.open(cow), target_file_size=group_target(cow), cancellable=False
    )
    assert compaction is not None and clustering is not None
    timeline = table.timeline()
    assert cancel_requests.is_cancellable(timeline, timeline.get(compaction))  # type: ignore[arg-type]
    timeline = HudiTable.open(cow).timeline()
    assert not cancel_requests.is_cancellable(timeline, timeline.get(clustering))  # type: ignore[arg-type]


def test_a_cancelled_plan_is_aborted_and_readers_see_the_table_as_before(
    clustered: tuple[str, str],
) -> None:
    base, instant = clustered
    rows, slices = oracle.snapshot(base), oracle.file_slices(base)
    table = HudiTable.open(base)
    plan_bytes = table.timeline().read_instant(table.timeline().get(instant))  # type: ignore[arg-type]

    assert request_cancel(table, instant) is True
    assert request_cancel(table, instant) is False, "a second request changes nothing"
    assert cancel_requests.cancel_requests(table.storage) == [instant]
    outcome = execute_cancel(table, instant)

    assert outcome.state == "ABORTED"
    timeline = table.timeline()
    aborted = timeline.get(instant)
    assert aborted is not None and aborted.state is State.ABORTED
    assert timeline.pending_clusterings() == []
    assert table.file_system_view().pending_clustering_file_ids() == set()
    folder = Path(base) / table.config.timeline_path
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith(instant))
    assert names == [aborted.file_name(table.config.timeline_layout_version)]
    assert (folder / names[0]).read_bytes() == plan_bytes, "the aborted file keeps the plan"
    assert cancel_requests.cancel_requests(table.storage) == []
    assert oracle.snapshot(base).equals(rows)
    assert oracle.file_slices(base) == slices
    # once aborted, a request is a no-op and a second execution finds nothing to do
    assert request_cancel(table, instant) is False
    assert execute_cancel(table, instant).state == "ABORTED"
    assert cancel_requests.cancel_requests(table.storage) == []


def test_a_plan_whose_job_still_beats_is_requested_but_not_aborted(
    clustered: tuple[str, str],
) -> None:
    base, instant = clustered
    table = HudiTable.open(base)
    request_cancel(table, instant)
    heartbeat.beat(table.storage, instant)
    with pytest.raises(InstantInFlightError, match="live heartbeat"):
        execute_cancel(table, instant)
    assert table.timeline().get(instant).is_pending  # type: ignore[union-attr]
    assert cancel_requests.is_cancel_requested(table.storage, instant), "the request stays"
    stale = time.time() - 3 * heartbeat.DEFAULT_INTERVAL_SECONDS
    beat_file = Path(base) / heartbeat.heartbeat_path(instant)
    os.utime(beat_file, (stale, stale))
    assert execute_cancel(table, instant).state == "ABORTED"


def test_execute_cancel_needs_a_request_and_drops_stale_ones(clustered: tuple[str, str]) -> None:
    base, instant = clustered
    table = HudiTable.open(base)
    with pytest.raises(CancelRefusedError, match="no cancel was requested"):
        execute_cancel(table, instant)
    assert table.timeline().get(instant).is_pending  # type: ignore[union-attr]
    # a request for an instant that is not on the timeline (any more) is only removed
    table.storage.write_bytes(cancel_requests.cancel_path("20200101000000000"), b"")
    assert execute_cancel(table, "20200101000000000").state == "GONE"
    assert cancel_requests.cancel_requests(table.storage) == []


def test_a_completed_instant_cannot_be_cancelled(tmp_path: Path) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=60, table_version=9)
    table = HudiTable.open(base)
    done = table.timeline().commits()[-1].requested_time
    with pytest.raises(CancelRefusedError, match="has completed"):
        request_cancel(table, done)
    with pytest.raises(CancelRefusedError, match="no plan at instant"):
        request_cancel(table, "20200101000000000")
    assert cancel_requests.cancel_requests(table.storage) == []
