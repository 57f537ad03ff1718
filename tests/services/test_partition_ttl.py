"""Partition TTL's planner on tables tms's sample writer wrote (versions 6 and 9) at instant
times a test clock gives: a partition's last commit time is Hudi's (the newest base instant of
its latest file slices), the TTL boundary is Hudi's, glob patterns select partitions, pending
work holds partitions with its reason, and the plan is Hudi's requested replace metadata of a
DELETE_PARTITION that no part of tms takes for a clustering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.services.test_clean import batch, new_table
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import PlanNotFoundError, UnsupportedTableError
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import new_file_id
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat, transitions
from tms.hudi.timeline.instant import Action, State, format_instant_time
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.apache_hudi import partition_ttl as hudi_partition_ttl
from tms.services.compaction.plan import schedule_compaction
from tms.services.partition_ttl.pending import PLAN_PARTITIONS_KEY, pending_work
from tms.services.partition_ttl.plan import (
    PLAN_AS_OF_KEY,
    PLAN_DAYS_KEY,
    dry_run,
    expires,
    pending_partition_ttls,
    plan_refusals,
    planned_partitions,
    schedule_partition_ttl,
)
from tms.services.registry import table_service
from tms.testing.sample_writer.writer import HudiWriter

DAY0 = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)


class Clock:
    """The timeline's clock in these tests: a millisecond later at every reading."""

    def __init__(self, start: datetime) -> None:
        self.current = start

    @classmethod
    def at(cls, day: str) -> Clock:
        return cls(datetime.fromisoformat(day).replace(tzinfo=UTC))

    def now(self, tz: Any = None) -> datetime:
        self.current += timedelta(milliseconds=1)
        return self.current

    def at_day(self, day: int) -> None:
        self.current = max(self.current, DAY0 + timedelta(days=day))


def frozen_clock(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> Clock:
    """New instant and completion times read from `clock` (`tms.hudi.timeline.transitions`)."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return clock.now(tz)

    monkeypatch.setattr(transitions, "datetime", Frozen)
    return clock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    yield frozen_clock(monkeypatch, Clock(DAY0))


def day(n: float) -> str:
    return format_instant_time(DAY0 + timedelta(days=n))


def aged_table(tmp_path: Path, clock: Clock, table_version: int, table_type: str) -> str:
    """sf, nyc and la written on day 0; on day 10 sf's rows updated and new rows in la."""
    base, writer = new_table(tmp_path, table_type, table_version=table_version)
    writer.insert(batch(range(30), ts=1))
    clock.at_day(10)
    writer.upsert(batch(range(0, 30, 3), ts=2))  # sf only
    writer.insert(batch(range(32, 50, 3), ts=2))  # la only, new file groups
    return base


def verdicts(found: Any) -> dict[str, str]:
    return {v.partition: v.reason for v in found}


@pytest.mark.parametrize("table_type", [MERGE_ON_READ, COPY_ON_WRITE], ids=["mor", "cow"])
def test_a_partition_is_expired_by_the_newest_base_instant_of_its_latest_slices(
    tmp_path: Path, clock: Clock, table_version: int, table_type: str
) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, table_version, table_type))
    report = dry_run(table, ttl_days=5, now=day(12))
    first = table.timeline().commits()[0].requested_time
    assert first.startswith("20260101")
    gone = {v.partition: v.last_commit_time for v in report.expired}
    kept = {v.partition: v for v in report.kept}
    assert gone["nyc"] == first and (kept["la"].last_commit_time or "") > day(10)
    assert kept["la"].reason == "last commit within 5 days"
    if table_type == MERGE_ON_READ:
        # Hudi's rule: updates written as log files do not renew the partition
        assert gone["sf"] == first
    else:
        assert (kept["sf"].last_commit_time or "") > day(10) and "sf" not in gone
    assert report.not_selected == 0 and report.as_of == day(12)
    # a TTL longer than the partitions' age keeps them all
    later = dry_run(table, ttl_days=30, now=day(12))
    assert not later.expired and len(later.kept) == 3


def test_the_boundary_and_the_instant_time_widths_are_hudis() -> None:
    last = "20260101080000000"
    assert not expires(last, 1, "20260102080000000")  # exactly one day later: kept
    assert expires(last, 1, "20260102080000001")
    # 14 digits read with 999 milliseconds, as Hudi reads them
    assert not expires("20260101080000", 1, "20260102080000999")
    assert expires("20260101080000", 1, "20260102080001")
    with pytest.raises(ValueError):
        expires("00000000000001", 1, last)  # a bootstrap's placeholder is no date


def test_glob_patterns_select_the_partitions_considered(tmp_path: Path, clock: Clock) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, 9, MERGE_ON_READ))
    report = dry_run(table, ttl_days=5, ttl_partitions=("s*", "n?c"), now=day(12))
    assert sorted(report.partitions) == ["nyc", "sf"] and report.not_selected == 1
    only = dry_run(table, ttl_days=5, ttl_partitions=("nyc",), now=day(12))
    assert only.partitions == ["nyc"] and only.not_selected == 2 and not only.kept
    assert dry_run(table, ttl_days=5, ttl_partitions=("x*",), now=day(12)).not_selected == 3
    # at most ttl_max_partitions go, the oldest first; the rest wait for the next run
    capped = dry_run(table, ttl_days=5, ttl_max_partitions=1, now=day(12))
    assert len(capped.expired) == 1
    assert any("over the 1 partitions" in v.reason for v in capped.kept)


def test_pending_work_holds_the_partitions_it_writes(
    tmp_path: Path, clock: Clock, table_version: int
) -> None:
    base = aged_table(tmp_path, clock, table_version, MERGE_ON_READ)
    table = HudiTable.open(base)
    compaction = schedule_compaction(table)  # sf's slices have log files
    assert compaction is not None
    # a write in flight in nyc, its markers saying so
    writing = new_instant_time(table.timeline().instants)
    requested = request(table.storage, table.config, writing, Action.DELTA_COMMIT)
    transition(table.storage, table.config, requested, State.INFLIGHT)
    marker = Marker("nyc", f"{new_file_id()}_0-1-0_{writing}.parquet", MarkerType.CREATE)
    create_marker(table.storage, writing, marker)

    report = dry_run(table, ttl_days=5, now=day(40))
    kept = verdicts(report.kept)
    assert kept["sf"] == f"expired, but compaction {compaction} is pending on it"
    assert kept["nyc"] == f"expired, but write {writing} (deltacommit, inflight) is pending on it"
    assert report.partitions == ["la"]

    # a write requested and not yet inflight may write anywhere: every partition waits
    unknown = new_instant_time(table.timeline().instants)
    request(table.storage, table.config, unknown, Action.DELTA_COMMIT)
    held = dry_run(table, ttl_days=5, now=day(40))
    assert not held.expired
    assert all(f"write {unknown} (deltacommit, requested)" in v.reason for v in held.kept)
    assert schedule_partition_ttl(table, ttl_days=5, now=day(40)) is None


def test_the_workload_profile_of_an_inflight_write_names_its_partitions(
    tmp_path: Path, clock: Clock
) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, 9, MERGE_ON_READ))
    writing = new_instant_time(table.timeline().instants)
    requested = request(table.storage, table.config, writing, Action.DELTA_COMMIT)
    profile = table.timeline().commit_metadata(table.timeline().commits()[0])
    profile.partition_to_write_stats = {"la": profile.partition_to_write_stats["la"]}
    transition(table.storage, table.config, requested, State.INFLIGHT, profile)
    held = pending_work(table, table.timeline())
    assert not held.everywhere and set(held.partitions) == {"la"}


def test_the_plan_is_hudis_delete_partition_and_no_clustering(
    tmp_path: Path, clock: Clock, table_version: int
) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, table_version, MERGE_ON_READ))
    instant = schedule_partition_ttl(table, ttl_days=5, now=day(12))
    assert instant is not None
    timeline = table.timeline()
    pending = timeline.get(instant)
    assert pending is not None and pending.action is Action.REPLACE_COMMIT
    assert pending.state is State.REQUESTED
    raw = timeline.read_instant(pending, State.REQUESTED)
    requested = avro_codec.decode(raw)  # the writer's own schema: as Hudi reads it
    assert requested["operationType"] == "DELETE_PARTITION"
    assert requested["clusteringPlan"] is None
    extra = requested["extraMetadata"]
    assert sorted(json.loads(extra[PLAN_PARTITIONS_KEY])) == ["nyc", "sf"]
    assert (extra[PLAN_DAYS_KEY], extra[PLAN_AS_OF_KEY]) == ("5", day(12))
    assert sorted(planned_partitions(timeline, pending) or []) == ["nyc", "sf"]

    # a pending write, no clustering, whichever part of tms looks
    assert not timeline.is_clustering(pending) and timeline.pending_clusterings() == []
    assert [i.requested_time for i in timeline.pending_writes()] == [instant]
    assert table.file_system_view(timeline).pending_clustering_file_ids() == set()
    assert [i.requested_time for i in pending_partition_ttls(timeline)] == [instant]
    assert table_service("partition_ttl").pending_plans(table) == [instant]
    assert table_service("clustering").pending_plans(table) == []
    # it holds its partitions from the next plan
    again = dry_run(table, ttl_days=5, now=day(12))
    assert not again.expired
    assert verdicts(again.kept)["nyc"] == f"expired, but partition TTL {instant} is pending on it"
    assert plan_refusals(table, pending, ["nyc", "sf"]) == []


def test_a_write_after_the_plan_makes_it_refused(tmp_path: Path, clock: Clock) -> None:
    base = aged_table(tmp_path, clock, 9, MERGE_ON_READ)
    table = HudiTable.open(base)
    instant = schedule_partition_ttl(table, ttl_days=5, now=day(12))
    assert instant is not None
    HudiWriter(HudiTable.open(base), max_file_rows=5).upsert(batch([1, 4], ts=3))  # nyc
    pending = table.timeline().get(instant)
    assert pending is not None
    reasons = plan_refusals(table, pending, ["nyc", "sf"])
    assert len(reasons) == 1 and reasons[0].startswith("nyc: written by ")


def test_a_writers_own_delete_partition_holds_every_partition(tmp_path: Path, clock: Clock) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, 9, MERGE_ON_READ))
    theirs = new_instant_time(table.timeline().instants)
    requested = {"operationType": "DELETE_PARTITION", "extraMetadata": {}}
    content = avro_codec.encode("HoodieRequestedReplaceMetadata", requested)
    request(table.storage, table.config, theirs, Action.REPLACE_COMMIT, content)
    assert pending_partition_ttls(table.timeline()) == []  # not ours to run
    report = dry_run(table, ttl_days=5, now=day(12))
    assert not report.expired
    kept = verdicts(report.kept)
    assert "records no partitions" in kept["nyc"] and "records no partitions" in kept["sf"]
    assert kept["la"] == "last commit within 5 days"


def test_nothing_to_delete_writes_no_plan(tmp_path: Path, clock: Clock) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, 6, MERGE_ON_READ))
    assert schedule_partition_ttl(table, ttl_days=30, now=day(12)) is None
    assert table.timeline().pending() == []
    base, writer = new_table(tmp_path / "flat", COPY_ON_WRITE, partitioned=False)
    writer.insert(batch(range(5), ts=1))
    flat = dry_run(HudiTable.open(base), ttl_days=1, now=day(400))
    assert not flat.expired and not flat.kept
    assert flat.notes == ("the table is not partitioned (hoodie.table.partition.fields is empty)",)
    with pytest.raises(ValueError, match="ttl_days must be positive"):
        dry_run(table, ttl_days=0)
    with pytest.raises(ValueError, match="not an instant time"):
        dry_run(table, ttl_days=1, now="yesterday")


def test_native_is_declined_and_auto_runs_hudis_code(tmp_path: Path, clock: Clock) -> None:
    table = HudiTable.open(aged_table(tmp_path, clock, 9, MERGE_ON_READ))
    service = table_service("partition_ttl")
    with pytest.raises(UnsupportedTableError, match="no partition_ttl executor"):
        service.decide(table, "native")
    decided = service.decide(table, "auto")
    assert decided.executor == "hudi" and "no partition_ttl executor" in (
        decided.native_declined or ""
    )


class HudiFails(RuntimeError):
    """What the stand-in for Hudi's code raises."""


def test_a_failed_run_goes_back_to_its_plan_and_a_crashed_one_is_rolled_back_first(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hudi's code stood in for: it moves the instant inflight with a heartbeat, as Hudi's
    executor does, then fails. The run is undone back to the requested plan, which a retry
    runs; an instant a crash left inflight is rolled back before Hudi's code is called."""
    table = HudiTable.open(aged_table(tmp_path, clock, 9, MERGE_ON_READ))
    instant = schedule_partition_ttl(table, ttl_days=5, now=day(12))
    assert instant is not None
    seen: list[tuple[State, list[str]]] = []

    def hudi_fails(spark: Any, table: HudiTable, at: str, partitions: list[str]) -> None:
        pending = table.timeline().get(at)
        assert pending is not None
        seen.append((pending.state, partitions))
        transition(table.storage, table.config, pending, State.INFLIGHT)
        heartbeat.beat(table.storage, at)
        raise HudiFails("Failed to drop partitions")

    monkeypatch.setattr(hudi_partition_ttl, "_delete_partitions", hudi_fails)
    executor = hudi_partition_ttl.HudiPartitionTtlExecutor()
    with pytest.raises(HudiFails):
        executor.execute(None, table, instant)
    assert seen == [(State.REQUESTED, ["nyc", "sf"])]
    back = table.timeline().get(instant)
    assert back is not None and back.state is State.REQUESTED
    assert not heartbeat.is_alive(table.storage, instant, 60.0)
    assert any(i.action is Action.ROLLBACK and i.is_completed for i in table.timeline().instants)

    requested = table.timeline().get(instant)
    assert requested is not None
    transition(table.storage, table.config, requested, State.INFLIGHT)  # a crash left it so
    with pytest.raises(HudiFails):
        executor.execute(None, table, instant)
    assert seen[1][0] is State.REQUESTED


def test_a_plan_that_no_longer_holds_is_removed_before_hudis_code_runs(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = aged_table(tmp_path, clock, 6, MERGE_ON_READ)
    table = HudiTable.open(base)
    instant = schedule_partition_ttl(table, ttl_days=5, now=day(12))
    assert instant is not None
    HudiWriter(HudiTable.open(base), max_file_rows=5).insert(batch([60, 63], ts=3))  # sf

    def never(*args: Any) -> None:
        raise AssertionError("Hudi's code must not run")

    monkeypatch.setattr(hudi_partition_ttl, "_delete_partitions", never)
    executor = hudi_partition_ttl.HudiPartitionTtlExecutor()
    with pytest.raises(RuntimeError, match=f"partition TTL {instant} no longer holds: sf: "):
        executor.execute(None, table, instant)
    assert table.timeline().get(instant) is None

    # a writer's own delete_partition is no plan of tms's to run
    theirs = new_instant_time(table.timeline().instants)
    content = avro_codec.encode(
        "HoodieRequestedReplaceMetadata", {"operationType": "DELETE_PARTITION"}
    )
    request(table.storage, table.config, theirs, Action.REPLACE_COMMIT, content)
    with pytest.raises(PlanNotFoundError, match="no partition TTL plan of tms"):
        executor.execute(None, table, theirs)
