"""Hudi writers beside tms's table services: Apache Hudi's Spark writer (1.2.0, table versions
6 and 9) with optimistic concurrency control and the lock tms takes too (Hudi's
`FileSystemBasedLockProvider`, its default folder `.hoodie`; failed writes cleaned lazily)
upserts into the file groups of tms's pending and executing compactions and clusterings.

Every outcome is the one Hudi's own conflict resolution gives with a Hudi table service in
tms's place (`SimpleConcurrentFileWritesConflictResolutionStrategy`, the default; the
clustering update strategies; a writer routing updates of a pending compaction's file groups
to the new slice's log files), nothing committed is lost (the test's model of the rows),
Hudi's reader and hudi-rs read the model right afterwards, and Hudi's writer writes on.

Interleavings are fixed by the order of calls: a plan is written before the writer starts,
or the writer's whole write runs inside tms's execution when it enters a stage (tms's
progress stages: after its heartbeat started and its instant went inflight, before its
Spark tasks or before it takes the lock to commit).

Released Hudi writers know nothing of RFC-79: they never request a cancel, and they treat a
cancellable tms plan as any pending plan, so cancellable and not give the same outcomes here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiJavaError, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tms.hudi.errors import PlanNotFoundError
from tms.hudi.locks import LockSpec
from tms.hudi.table import HudiTable
from tms.services import progress
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.services.conflicts import PlanRolledBackError

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
ALLOW_UPDATES = "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"
CLUSTERING_UPDATE_REJECTED = "org.apache.hudi.exception.HoodieClusteringUpdateException"
WRITE_CONFLICT = "org.apache.hudi.exception.HoodieWriteConflictException"
LOCK_NOT_TAKEN = "org.apache.hudi.exception.HoodieLockException"
SHORT_LOCK_WAIT = {
    "hoodie.write.lock.wait_time_ms": "1000",
    "hoodie.write.lock.wait_time_ms_between_retry": "200",
    "hoodie.write.lock.num_retries": "1",
    "hoodie.write.lock.client.num_retries": "1",
    "hoodie.write.lock.client.wait_time_ms_between_retry": "200",
}


def writer_options(path: Path, table_version: int, lock_folder: str | None) -> dict[str, str]:
    """A multi-writer Hudi writer that leaves compaction and clustering to tms; its lock
    file in `lock_folder` of the table (a full path for Hudi), else Hudi's default folder."""
    lock_path = (
        {"hoodie.write.lock.filesystem.path": str(path / lock_folder)} if lock_folder else {}
    )
    return {
        **keyed_table(path.name),
        # new keys go to new file groups, so a partition holds several small ones to cluster
        "hoodie.parquet.small.file.limit": "0",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        "hoodie.write.lock.provider": LOCK_PROVIDER,
        **lock_path,
        # tms compacts: a batch writer of a merge-on-read table otherwise runs every pending
        # compaction plan itself, tms's included
        "hoodie.compact.inline": "false",
        **HUDI_1_2.write_options(table_version),
    }


@contextmanager
def on_stage(stage: str, step: Callable[[], None]) -> Iterator[list[str]]:
    """Run `step` once, in the service's own thread, when the service enters `stage`."""
    tracker = progress.Progress()
    entered: list[str] = []

    def changed() -> None:
        now = tracker.snapshot()
        if now is not None and now.stage == stage and not entered:
            entered.append(stage)
            step()

    tracker.listen(changed)
    with progress.tracking(tracker):
        yield entered


class Beside:
    """Hudi's writer on one table, and the model of the rows it committed."""

    def __init__(
        self, hudi: HudiSpark, path: Path, table_version: int, lock_folder: str | None
    ) -> None:
        self.hudi = hudi
        self.path = path
        self.options = writer_options(path, table_version, lock_folder)
        self.lock = LockSpec.of(folder=lock_folder)
        self.model: dict[str, Row] = {}

    def write(self, rows: list[Row], operation: str = "upsert", **extra: str) -> None:
        options = {**self.options, **extra, "hoodie.datasource.write.operation": operation}
        self.hudi.write(self.path, rows, SCHEMA, options)
        self.model.update((row[0], row) for row in rows)

    def loses(self, exception: str, rows: list[Row], **extra: str) -> None:
        """The write fails with Hudi's `exception` and commits nothing."""
        with pytest.raises(HudiJavaError, match=exception.replace(".", r"\.")):
            self.hudi.write(
                self.path,
                rows,
                SCHEMA,
                {**self.options, **extra, "hoodie.datasource.write.operation": "upsert"},
            )

    def table(self) -> HudiTable:
        """The table as tms opens it, locking where the writer locks."""
        return HudiTable.open(str(self.path), lock=self.lock)

    def reads_right(self) -> None:
        expected = sorted(self.model.values())
        assert self.hudi.read(self.path, COLUMNS) == expected
        assert hudi_rs_rows(str(self.path)) == expected


@pytest.mark.parametrize(
    ("table_version", "lock_folder"),
    [
        pytest.param(6, None, id="v6-default-lock-folder", marks=pytest.mark.extended),
        pytest.param(9, ".hoodie/.aux", id="v9-lock-folder-set"),
    ],
)
def test_hudi_writers_beside_tms_compaction_and_clustering(
    spark: Any,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    table_version: int,
    lock_folder: str | None,
) -> None:
    path = tmp_path / f"mor_v{table_version}"
    writer = Beside(hudi_spark(HUDI_1_2), path, table_version, lock_folder)
    writer.write(
        [("c1", 1, "c", 1.0), ("c2", 1, "c", 2.0), ("m1", 1, "m", 1.0), ("m2", 1, "m", 2.0)],
        "insert",
    )
    writer.write([("c3", 1, "c", 3.0)], "insert")
    writer.write([("m1", 2, "m", 1.5)])

    # A compaction pending, then executing: the writer's updates of its file slices commit
    # (Hudi: updates of a pending compaction's file groups go to the new slice's log files;
    # `resolveConflict` lets a write pass a COMPACT), and the compaction commits too
    compaction = schedule_compaction(writer.table())
    assert compaction is not None
    writer.write([("m2", 2, "m", 2.5)])
    with on_stage("compacting", lambda: writer.write([("m1", 3, "m", 1.75)])) as entered:
        compacted = execute_compaction(spark, writer.table(), compaction)
    assert entered and compacted.files_written == 1
    assert writer.table().timeline().is_completed(compaction)
    writer.reads_right()

    # A writer that compacts inline (a batch writer's default on merge-on-read) runs every
    # pending compaction after its commit, tms's plan as a Hudi scheduler's: it completes it
    # itself (tms's execution then finds it done)
    compaction = schedule_compaction(writer.table())
    assert compaction is not None
    inline = {"hoodie.compact.inline": "true"}
    writer.write([("m2", 4, "m", 2.0)], **inline)
    assert writer.table().timeline().is_completed(compaction)
    with pytest.raises(PlanNotFoundError, match=f"{compaction} has already completed"):
        execute_compaction(spark, writer.table(), compaction)
    writer.reads_right()

    # ... but not one another job is executing: tms's heartbeat on the instant
    # (`.hoodie/.heartbeat/<instant>`, as Hudi's jobs beat) makes it refuse, as it refuses a
    # Hudi compactor's, with Hudi's lock exception after its own commit completed; tms's
    # compaction then completes with the writer's insert kept
    compaction = schedule_compaction(writer.table())
    assert compaction is not None

    def writer_compacts_inline() -> None:
        refused = f"Cannot execute instant {compaction} due to heartbeat by concurrent"
        with pytest.raises(HudiJavaError, match=f"{LOCK_NOT_TAKEN}: {refused}"):
            writer.write([("n1", 4, "n", 3.0)], "insert", **inline)
        writer.model["n1"] = ("n1", 4, "n", 3.0)  # committed before its inline compaction

    with on_stage("committing", writer_compacts_inline) as entered:
        compacted = execute_compaction(spark, writer.table(), compaction)
    assert entered and compacted.files_written == 1
    assert writer.table().timeline().is_completed(compaction)
    writer.reads_right()
    writer.write([("m2", 5, "m", 2.5)])

    # A clustering that is not cancellable, planned before the writers start: Hudi's
    # default SparkRejectUpdateStrategy refuses the update before writing anything, and with
    # SparkAllowUpdateStrategy the write loses at its commit, because Hudi's writers count
    # every pending clustering among the candidate instants of their conflict check; a
    # writer of other file groups commits while the clustering commits; the clustering
    # completes (Hudi's own clustering makes no check before it commits)
    clustering = schedule_clustering(writer.table(), small_file_limit=1 << 30, cancellable=False)
    assert clustering is not None
    writer.loses(CLUSTERING_UPDATE_REJECTED, [("c1", 5, "c", 10.0)])
    writer.loses(
        WRITE_CONFLICT,
        [("c2", 5, "c", 20.0)],
        **{"hoodie.clustering.updates.strategy": ALLOW_UPDATES},
    )
    with on_stage("committing", lambda: writer.write([("m2", 6, "m", 2.75)])) as entered:
        clustered = execute_clustering(spark, writer.table(), clustering, heartbeat_interval=1)
    assert entered and clustered.file_groups == 2 and clustered.files_written == 1
    writer.reads_right()
    writer.write([("c1", 7, "c", 11.0), ("c4", 7, "c", 4.0)])  # into the clustered group, and anew

    # A cancellable clustering while it executes: the writers' updates fail as above (with
    # either strategy), and the clustering completes, not cancelled for writes that could
    # never commit
    clustering = schedule_clustering(writer.table(), small_file_limit=1 << 30, cancellable=True)
    assert clustering is not None

    def writers_lose() -> None:
        writer.loses(CLUSTERING_UPDATE_REJECTED, [("c4", 8, "c", 40.0)])
        writer.loses(
            WRITE_CONFLICT,
            [("c1", 8, "c", 10.5)],
            **{"hoodie.clustering.updates.strategy": ALLOW_UPDATES},
        )

    with on_stage("clustering", writers_lose) as entered:
        clustered = execute_clustering(spark, writer.table(), clustering, heartbeat_interval=1)
    assert entered and clustered.file_groups == 2
    assert writer.table().timeline().is_completed(clustering)
    writer.reads_right()

    # A writer that allows updates and rolls back pending clusterings on conflict
    # (`hoodie.clustering.rollback.pending.replacecommit.on.conflict`) does so to tms's plan
    # while tms executes it, and commits; tms's clustering must then not complete (Hudi's
    # own would find its instant gone): the writer's update stands
    writer.write([("c5", 9, "c", 5.0)], "insert")
    clustering = schedule_clustering(writer.table(), small_file_limit=1 << 30, cancellable=False)
    assert clustering is not None
    rollback = {
        "hoodie.clustering.updates.strategy": ALLOW_UPDATES,
        "hoodie.clustering.rollback.pending.replacecommit.on.conflict": "true",
    }
    with (
        on_stage(
            "committing", lambda: writer.write([("c5", 10, "c", 50.0)], **rollback)
        ) as entered,
        pytest.raises(PlanRolledBackError, match=f"plan {clustering} left the timeline"),
    ):
        execute_clustering(spark, writer.table(), clustering, heartbeat_interval=1)
    assert entered and writer.table().timeline().get(clustering) is None
    writer.reads_right()
    writer.write([("c5", 11, "c", 55.0), ("m1", 11, "m", 1.0)])
    writer.reads_right()

    # tms holds the table lock (to commit, say): Hudi's writer waits for the same lock file
    # and gives up with Hudi's lock exception, committing nothing
    with writer.table().lock.hold(writer.table().storage):
        writer.loses(LOCK_NOT_TAKEN, [("m1", 12, "m", 0.5)], **SHORT_LOCK_WAIT)
    writer.reads_right()
