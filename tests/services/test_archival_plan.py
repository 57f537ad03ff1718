"""The archival dry run (`tms.services.archival.plan`) follows Hudi's archiver rule by rule, on
timelines written by hand into tables tms's writer created (versions 6 and 9, layout 1 and 2):
keep.min and keep.max, the cleaner's retention raising them, a pending write, a savepoint, the
last clean's retained instant with a replacecommit, merge-on-read's compaction trigger, and
the metadata table's latest compaction. One rule binds in each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tms.hudi.avro import codec as avro_codec
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.planning import BadJobInput
from tms.services.archival.plan import ArchivalPlan, plan_archival
from tms.testing.sample_writer.new_table import create_table

T = [f"202401010000{i:02d}000" for i in range(40)]
"""Instant times, a second apart: T[i] completes half a second later (`done`)."""


def done(requested: str) -> str:
    return requested[:-3] + "500"


class Hand:
    """A table whose timeline a test writes by hand, instant file by instant file."""

    def __init__(
        self,
        root: Path,
        table_version: int,
        table_type: str = COPY_ON_WRITE,
        *,
        metadata: bool = False,
        props: dict[str, str] | None = None,
    ) -> None:
        self.base = str(root / "t")
        create_table(
            self.base,
            "t",
            table_type=table_type,
            record_key_fields=["id"],
            ordering_field="ts",
            table_version=table_version,
            extra_properties=props,
            metadata_partitions=("files",) if metadata else (),
        )
        self.layout = 2 if table_version >= 8 else 1

    def put(self, storage: Storage, instant: Instant, content: bytes = b"") -> None:
        folder = TableConfig.load(storage).timeline_path
        storage.write_bytes(f"{folder}/{instant.file_name(self.layout)}", content)

    def instant(
        self, at: str, action: Action, state: State = State.COMPLETED, content: bytes = b""
    ) -> None:
        """An instant's files up to `state` on the data table (the completed one holding
        `content`)."""
        self._instant(Storage(self.base), at, action, state, content)

    def _instant(
        self, storage: Storage, at: str, action: Action, state: State, content: bytes = b""
    ) -> None:
        self.put(storage, Instant(at, action, State.REQUESTED))
        if state >= State.INFLIGHT:
            self.put(storage, Instant(at, action, State.INFLIGHT))
        if state is State.COMPLETED:
            self.put(
                storage, Instant(at, action, State.REQUESTED).with_state(state, done(at)), content
            )

    def commits(self, times: list[str], action: Action = Action.COMMIT) -> None:
        for at in times:
            self.instant(at, action)

    def clean(self, at: str, retained: str | None, savepointed: str = "") -> None:
        """A completed clean whose plan retained from `retained` (None: from no commit)."""
        plan = {
            "earliestInstantToRetain": (
                {"timestamp": retained, "action": "commit", "state": "COMPLETED"}
                if retained
                else None
            ),
            "policy": "KEEP_LATEST_COMMITS",
            "filePathsToBeDeletedPerPartition": {},
            "extraMetadata": {"savepointed_timestamps": savepointed} if savepointed else None,
            "version": 2,
        }
        storage = Storage(self.base)
        self.put(storage, Instant(at, Action.CLEAN, State.REQUESTED), self._plan(plan))
        self.put(storage, Instant(at, Action.CLEAN, State.INFLIGHT))
        self.put(storage, Instant(at, Action.CLEAN, State.COMPLETED, done(at)))

    @staticmethod
    def _plan(plan: dict[str, object]) -> bytes:
        return avro_codec.encode("HoodieCleanerPlan", plan)

    def metadata_compaction(self, at: str) -> None:
        """A completed compaction on the metadata table's timeline."""
        storage = Storage(f"{self.base}/.hoodie/metadata")
        self.put(storage, Instant(at, Action.COMPACTION, State.REQUESTED))
        self.put(storage, Instant(at, Action.COMPACTION, State.INFLIGHT))
        self.put(storage, Instant(at, Action.COMMIT, State.COMPLETED, done(at)))

    def plan(self, keep_min: int | None = None, keep_max: int | None = None) -> ArchivalPlan:
        return plan_archival(HudiTable.open(self.base), keep_min=keep_min, keep_max=keep_max)


def archived(plan: ArchivalPlan) -> list[str]:
    return [i.requested_time for i in plan.commits]


def test_nothing_is_due_up_to_keep_max_then_it_archives_down_to_keep_min(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:5])
    plan = hand.plan(keep_min=3, keep_max=5)
    assert not plan.due and plan.stopped_by == "keep_max"
    assert "5 completed commits" in plan.reason and "hoodie.keep.max.commits=5" in plan.reason
    assert plan.earliest_kept == T[0]

    hand.commits(T[5:8])
    plan = hand.plan(keep_min=3, keep_max=5)
    assert archived(plan) == T[:5]  # 8 commits, down to the latest 3
    assert plan.stopped_by == "keep_min" and plan.earliest_kept == T[5]
    assert plan.to_dict()["commits_archived"] == 5
    # Hudi's defaults (20, 30) archive nothing of 8 commits
    assert not hand.plan().due and hand.plan().keep.min == 20


def test_the_tables_own_keep_configs_apply_and_an_operation_overrides_them(
    tmp_path: Path,
) -> None:
    hand = Hand(tmp_path, 9, props={"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "4"})
    hand.commits(T[:6])
    assert archived(hand.plan()) == T[:4]
    assert archived(hand.plan(keep_min=4, keep_max=5)) == T[:2]
    with pytest.raises(BadJobInput, match=r"keep_max: hoodie\.keep\.max\.commits must be greater"):
        hand.plan(keep_min=4, keep_max=4)
    with pytest.raises(BadJobInput, match="keep_max"):
        hand.plan(keep_min=6)  # above the table's keep.max


def test_the_cleaners_retention_raises_keep_min_as_hudi_adjusts_it(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:14])
    # the cleaner keeps 10 commits (Hudi's default): from T[4], so 9 after it + 2 = 11 kept
    plan = hand.plan(keep_min=3, keep_max=5)
    assert (plan.keep.min, plan.keep.max) == (11, 13)
    assert (plan.configured.min, plan.configured.max) == (3, 5)
    assert archived(plan) == T[:3] and plan.stopped_by == "keep_min"


def test_a_pending_write_keeps_the_last_commit_before_it(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:3])
    hand.instant(T[3], Action.COMMIT, State.INFLIGHT)
    hand.commits(T[4:9])
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == T[:2]  # T[2], the last completed commit before T[3], stays
    assert plan.stopped_by == "pending" and plan.earliest_kept == T[2]
    assert f"commit {T[3]} is pending (INFLIGHT)" in plan.reason


def test_nothing_from_the_first_savepoint_on_is_archived(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:8])
    hand.instant(T[3], Action.SAVEPOINT)
    hand.instant(T[6], Action.SAVEPOINT)
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == T[:3]
    assert plan.stopped_by == "savepoint" and T[3] in plan.reason
    assert [x.rule for x in plan.limits] == ["savepoint"]


def test_a_replacecommit_stays_until_the_last_clean_retained_past_it(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:2])
    hand.instant(T[2], Action.REPLACE_COMMIT)
    hand.commits(T[3:6])
    hand.instant(T[6], Action.REPLACE_COMMIT)
    hand.commits(T[7:10])
    # no clean yet: its replaced files may be on storage, so the first replacecommit stays
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == T[:2] and plan.stopped_by == "clustering"
    assert "no clean has run" in plan.reason

    # a clean retaining from T[4] removed what T[2] replaced: T[6] is the first kept now
    hand.clean(T[10], retained=T[4])
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == [T[0], T[1], T[2], T[3], T[4], T[5]]
    assert plan.stopped_by == "clustering" and f"retained from {T[4]}" in plan.reason
    assert plan.instants == tuple(plan.commits)  # the clean came after every commit archived


def test_a_clean_that_kept_a_savepoints_files_holds_back_to_that_savepoint(
    tmp_path: Path,
) -> None:
    hand = Hand(tmp_path, 9)
    hand.commits(T[:2])
    hand.instant(T[2], Action.REPLACE_COMMIT)
    hand.commits(T[3:9])
    # the savepoint at T[1] was removed since; the clean kept its files past T[2]'s replace
    hand.clean(T[9], retained=T[5], savepointed=T[1])
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == T[:2] and plan.stopped_by == "clustering"
    assert f"savepoint {T[1]}" in plan.reason


def test_merge_on_read_keeps_the_delta_commits_its_compaction_trigger_counts(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path / "uncompacted", table_version, MERGE_ON_READ)
    hand.commits(T[:8], Action.DELTA_COMMIT)
    plan = hand.plan(keep_min=1, keep_max=2)
    # no compaction: the last 5 delta commits (hoodie.compact.inline.max.delta.commits) stay
    assert archived(plan) == T[:3] and plan.stopped_by == "compaction"
    assert plan.earliest_kept == T[3] and "the table has no compaction" in plan.reason

    # a compaction followed by 2 delta commits: the compaction stays
    hand = Hand(tmp_path / "compacted", table_version, MERGE_ON_READ)
    hand.commits(T[:5], Action.DELTA_COMMIT)
    hand.instant(T[5], Action.COMPACTION)
    hand.commits(T[6:8], Action.DELTA_COMMIT)
    plan = hand.plan(keep_min=1, keep_max=2)
    assert archived(plan) == T[:5] and plan.earliest_kept == T[5]
    assert plan.stopped_by == "compaction"
    assert f"since the latest compaction {T[5]}" in plan.reason


def test_the_metadata_tables_latest_compaction_bounds_archival(
    tmp_path: Path, table_version: int
) -> None:
    hand = Hand(tmp_path, table_version, metadata=True)
    hand.commits(T[:8])
    plan = hand.plan(keep_min=2, keep_max=4)
    assert not plan.due and plan.stopped_by == "metadata_compaction"
    assert "no completed compaction" in plan.reason

    # compacted between T[3]'s completion and T[4]: layout 1 archives what was requested
    # before it, layout 2 keeps the first commit completed after it
    hand.metadata_compaction(T[3][:-3] + "700")
    plan = hand.plan(keep_min=2, keep_max=4)
    assert archived(plan) == T[:4] and plan.stopped_by == "metadata_compaction"
    assert plan.earliest_kept == T[4]


def test_cleans_and_rollbacks_go_with_the_commits(tmp_path: Path, table_version: int) -> None:
    hand = Hand(tmp_path, table_version)
    hand.commits(T[:3])
    hand.clean(T[3], retained=T[1])
    hand.instant(T[4], Action.ROLLBACK)
    hand.commits(T[5:10])
    hand.clean(T[10], retained=T[6])
    plan = hand.plan(keep_min=3, keep_max=5)
    assert archived(plan) == [T[0], T[1], T[2], T[5], T[6]]
    others = [(i.requested_time, i.action) for i in plan.instants if i not in plan.commits]
    if table_version >= 8:  # those requested before the last commit archived
        assert others == [(T[3], Action.CLEAN), (T[4], Action.ROLLBACK)]
    else:  # per action, only past keep.max of them
        assert others == []


def test_the_cleaners_hours_are_counted_back_on_the_instant_clock() -> None:
    from tms.services.archival.plan import _hours_before

    assert _hours_before("20240101010000123", 2) == "20231231230000123"
    assert _hours_before("20240101010000", 24) == "20231231010000000"
