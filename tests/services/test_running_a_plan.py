"""The one path of a pending plan's run (`tms.services.execution.running_plan`) on real tables:
a live heartbeat refused before anything is written, and an inflight instant left by a crashed
attempt rolled back (`Inflight.ROLL_BACK`, compaction) or run again (`Inflight.RUN_AGAIN`,
clean). No Spark: the body stands in for the executor's tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.test_clean import cow_with_versions, planned_paths
from tests.services.test_compaction import mor_table
from tms.hudi.errors import InstantInFlightError
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import transition
from tms.services.clean.execute import schedule_clean
from tms.services.compaction.plan import schedule_compaction
from tms.services.execution import Inflight, ServiceResult, running_plan

INTERVAL = 30.0
"""Long enough that a heartbeat beaten by the test stays alive through it."""


def files_of(base: str) -> dict[str, bytes]:
    """Every file under the table, by path relative to it, with its bytes."""
    root = Path(base)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def compaction_plan(tmp_path: Path, table_version: int) -> tuple[HudiTable, Instant]:
    base, _, _ = mor_table(tmp_path, table_version=table_version)
    table = HudiTable.open(base)
    instant_time = schedule_compaction(table)
    assert instant_time is not None
    instant = table.timeline().get(instant_time)
    assert instant is not None and instant.state is State.REQUESTED
    return table, instant


def clean_plan(tmp_path: Path, table_version: int) -> tuple[HudiTable, Instant]:
    table = HudiTable.open(cow_with_versions(tmp_path, upserts=2, table_version=table_version))
    instant_time = schedule_clean(table, policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert instant_time is not None
    return table, Instant(instant_time, Action.CLEAN, State.REQUESTED)


def crashed_compaction(table: HudiTable, instant: Instant) -> tuple[Instant, str]:
    """The compaction inflight with one file of its first file group written, as a crashed
    attempt leaves it; the file's path."""
    inflight = transition(table.storage, table.config, instant, State.INFLIGHT)
    operation = table.timeline().compaction_plan(instant)["operations"][0]
    name = str(BaseFileName(operation["fileId"], "0-1-0", instant.requested_time))
    marker = Marker(operation["partitionPath"], name, MarkerType.MERGE)
    create_marker(table.storage, instant.requested_time, marker)
    table.storage.write_bytes(marker.data_file_path, b"half a parquet file")
    return inflight, marker.data_file_path


@pytest.mark.parametrize("state", [State.REQUESTED, State.INFLIGHT])
def test_a_live_heartbeat_is_refused_before_anything_is_written(
    tmp_path: Path, table_version: int, state: State
) -> None:
    table, instant = clean_plan(tmp_path, table_version)
    if state is State.INFLIGHT:
        transition(table.storage, table.config, instant, State.INFLIGHT)
    heartbeat.beat(table.storage, instant.requested_time)  # another job runs it
    before = files_of(table.base_path)
    result = ServiceResult(action="clean", instant=instant.requested_time)
    ran = False
    with (
        pytest.raises(InstantInFlightError, match="another job runs it"),
        running_plan(
            table.storage, instant.requested_time, result, INTERVAL, busy="another job runs it"
        ),
    ):
        ran = True
    assert not ran
    assert files_of(table.base_path) == before
    assert result.duration_seconds == 0.0


def test_roll_back_deletes_a_crashed_attempts_files_then_goes_inflight(
    tmp_path: Path, table_version: int
) -> None:
    table, requested = compaction_plan(tmp_path, table_version)
    crashed, partial = crashed_compaction(table, requested)
    ts = requested.requested_time
    result = ServiceResult(action="compaction", instant=ts)
    with (
        running_plan(table.storage, ts, result, INTERVAL, busy=None) as run,
        run.inflight(table, crashed, Inflight.ROLL_BACK) as inflight,
    ):
        assert inflight == Instant(ts, Action.COMPACTION, State.INFLIGHT)
        assert heartbeat.is_alive(table.storage, ts, INTERVAL)
        assert not table.storage.exists(partial)
        timeline = table.timeline()
        assert timeline.get(ts) == inflight
        assert len(result.rolled_back) == 1
        rollback = timeline.get(result.rolled_back[0])
        assert rollback is not None and rollback.action is Action.ROLLBACK
        assert rollback.is_completed
    assert heartbeat.last_beat(table.storage, ts) is None
    assert result.duration_seconds > 0


def test_roll_back_leaves_an_inflight_instant_with_a_live_heartbeat_alone(
    tmp_path: Path, table_version: int
) -> None:
    table, requested = compaction_plan(tmp_path, table_version)
    crashed, partial = crashed_compaction(table, requested)
    ts = requested.requested_time
    heartbeat.beat(table.storage, ts)  # the attempt is not dead: its job still beats
    before = files_of(table.base_path)
    result = ServiceResult(action="compaction", instant=ts)
    with (
        pytest.raises(InstantInFlightError, match="not rolling back"),
        running_plan(table.storage, ts, result, INTERVAL, busy=None) as run,
        run.inflight(table, crashed, Inflight.ROLL_BACK),
    ):
        pytest.fail("the body of a plan another job runs ran")
    assert files_of(table.base_path) == before
    assert table.storage.exists(partial) and result.rolled_back == []


def test_run_again_keeps_a_crashed_clean_inflight(tmp_path: Path, table_version: int) -> None:
    table, requested = clean_plan(tmp_path, table_version)
    ts = requested.requested_time
    paths = planned_paths(table, ts)
    plan = table.timeline().read_instant(requested, State.REQUESTED)
    crashed = transition(table.storage, table.config, requested, State.INFLIGHT, plan)
    Path(paths[0]).unlink()  # the crashed attempt deleted one file
    before = files_of(table.base_path)
    result = ServiceResult(action="clean", instant=ts)
    busy = f"clean {ts} has a live heartbeat (a job is running it)"
    with (
        running_plan(table.storage, ts, result, INTERVAL, busy=busy) as run,
        run.inflight(table, crashed, Inflight.RUN_AGAIN, plan) as inflight,
    ):
        assert inflight == crashed
        assert heartbeat.is_alive(table.storage, ts, INTERVAL)
        during = files_of(table.base_path)
        during.pop(heartbeat.heartbeat_path(ts))
        assert during == before, "nothing rolled back, nothing moved"
    assert result.rolled_back == []
    assert not [i for i in table.timeline().instants if i.action is Action.ROLLBACK]
    assert all(Path(p).exists() for p in paths[1:])


@pytest.mark.parametrize("crashed", [Inflight.ROLL_BACK, Inflight.RUN_AGAIN])
def test_a_requested_plan_moves_to_inflight_under_its_heartbeat(
    tmp_path: Path, table_version: int, crashed: Inflight
) -> None:
    table, requested = clean_plan(tmp_path, table_version)
    ts = requested.requested_time
    plan = table.timeline().read_instant(requested, State.REQUESTED)
    result = ServiceResult(action="clean", instant=ts)
    with (
        running_plan(table.storage, ts, result, INTERVAL, busy="busy") as run,
        run.inflight(table, requested, crashed, plan) as inflight,
    ):
        assert inflight == Instant(ts, Action.CLEAN, State.INFLIGHT)
        assert table.timeline().read_instant(inflight, State.INFLIGHT) == plan
        assert heartbeat.is_alive(table.storage, ts, INTERVAL)
    assert heartbeat.last_beat(table.storage, ts) is None
    assert result.rolled_back == []
