"""Hudi's own async indexer (RFC-45) as the planner and executor of index builds: its write
client's `scheduleIndexing` writes the `indexing` plan and `index` builds it, catches up with
the writes that completed meanwhile and completes the instant, as Hudi's `HoodieIndexer` does.

The plan is Hudi's `HoodieIndexPlan`, which tms's own index build writes too: a plan either
planned is a pending `indexing` instant like any other. Hudi's code builds what tms's declines
(a version 6 table's `files` partition, column stats of a merge-on-read table, a record index
over a key generator tms cannot reproduce)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tms.hudi.actions import INDEXING
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.metadata.index_build import request_refusals
from tms.hudi.metadata.indexing import (
    IndexPlan,
    abort_indexing,
    complete_indexing,
    ensure_schedulable,
    partition_names,
    read_plan,
)
from tms.hudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS, RECORD_INDEX
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import TableConfig
from tms.hudi.record_keys.table_keys import ambiguous_complex_keys
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.services.apache_hudi.clients import table_write_client, write_configs
from tms.services.apache_hudi.executor import HUDI_STAGE
from tms.services.apache_hudi.options import (
    PARTITION_SWITCHES,
)
from tms.services.apache_hudi.procedures import HudisCode
from tms.services.execution import ServiceResult, pending_plan
from tms.services.plan_executor import StageHook

__all__ = [
    "CATCH_UP_TIMEOUT_SECONDS",
    "HudiIndexExecutor",
    "HudiIndexPlanner",
    "hudi_refusals",
    "index_configs",
]

CATCH_UP_TIMEOUT_SECONDS = 600
"""How long Hudi's catch-up waits for writes pending when the build ends (its
`hoodie.metadata.index.check.timeout.seconds`), as tms's own build waits."""

_OCC = "optimistic_concurrency_control"


def index_configs(table: HudiTable, partitions: Sequence[str]) -> dict[str, str]:
    """The write configs of an index build of `partitions` on `table` (`write_configs`), with
    the switches of the partitions it has and of those to build on (Hudi builds only what is
    switched on), the async indexer's, and optimistic concurrency (Hudi's indexer refuses to
    run without)."""
    options = write_configs(table)
    options["hoodie.metadata.enable"] = "true"
    for partition in partitions:
        for key in PARTITION_SWITCHES.get(partition, ()):
            options[key] = "true"
    options["hoodie.metadata.index.async"] = "true"
    options["hoodie.metadata.index.check.timeout.seconds"] = str(CATCH_UP_TIMEOUT_SECONDS)
    options["hoodie.write.concurrency.mode"] = _OCC
    return options


@contextmanager
def _write_client(spark: Any, table: HudiTable, partitions: Sequence[str]) -> Iterator[Any]:
    """Hudi's write client for `table` with `index_configs`."""
    with table_write_client(spark, table, index_configs(table, partitions)) as client:
        yield client


def _partition_types(spark: Any, partitions: Sequence[str]) -> Any:
    """Hudi's `MetadataPartitionType`s of metadata partition names, as a Java list."""
    kinds = spark._jvm.org.apache.hudi.metadata.MetadataPartitionType
    listed = spark._jvm.java.util.ArrayList()
    for partition in partitions:
        listed.add(kinds.valueOf(partition.upper()))
    return listed


@dataclass(frozen=True)
class HudiIndexPlanner:
    """Plans an index build with Hudi's write client (`scheduleIndexing`). A drop is not
    planned: tms drops partitions itself whichever executor was asked."""

    action: str = INDEXING

    def schedule(self, spark: Any, table: HudiTable, params: Mapping[str, Any]) -> str | None:
        """Write Hudi's plan of the build of `params["partitions"]`; its instant. Refusals
        (of the request, of the timeline's state, of Hudi's code) come before anything is
        written."""
        partitions = partition_names(params.get("partitions") or ())
        timeline = table.timeline()
        ensure_schedulable(table.storage, table.config, timeline, partitions)
        reasons = request_refusals(table, partitions) + hudi_refusals(table, partitions)
        if reasons:
            raise UnsupportedTableError(
                f"cannot build {', '.join(partitions)} with Hudi's code: {'; '.join(reasons)}"
            )
        with _write_client(spark, table, partitions) as client:
            planned = client.scheduleIndexing(
                _partition_types(spark, partitions), spark._jvm.java.util.ArrayList()
            )
            return str(planned.get()) if planned.isPresent() else None


def hudi_refusals(table: HudiTable, partitions: Sequence[str]) -> list[str]:
    """Why Hudi's code is not given an index build of `partitions` on `table`, beyond the
    table's location (`HudiIndexExecutor.refusals`): stats partitions of a merge-on-read
    table (the next write of Hudi 1.2's writer rolls back the metadata table's delta commit
    of such a build, and the stats of the files it indexed are lost; its record index builds
    keep); a record index over virtual keys a single field keys under the complex key
    generator (Hudi's indexer keys the bare value, its writer's key generator `field:value`)."""
    reasons: list[str] = []
    config = table.config
    stats = [p for p in partitions if p in (COLUMN_STATS, PARTITION_STATS)]
    if stats and config.is_merge_on_read:
        reasons.append(
            f"{', '.join(stats)} on a merge-on-read table: Hudi's writer rolls back the "
            "metadata table's delta commit of Hudi's own stats build at its next write"
        )
    virtual = not config.populate_meta_fields
    if RECORD_INDEX in partitions and virtual and ambiguous_complex_keys(config):
        reasons.append(
            "record_index over virtual keys of a single field under the complex key "
            "generator: Hudi's indexer keys the bare value where its writer's key "
            "generator keys `field:value` (HUDI-7001), so the index would not match"
        )
    return reasons


@dataclass(frozen=True)
class HudiIndexExecutor(HudisCode):
    """Runs a pending index plan with Hudi's write client (`index`): the build, the
    catch-up and the completion. A run that fails, or one a crash left inflight, is undone
    back to its plan, which stays for the retry."""

    action: str = INDEXING

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        started = time.monotonic()
        instant = pending_plan(table, instant_time, (Action.INDEXING,))
        plan = read_plan(table.timeline(), instant)
        result = ServiceResult(INDEXING, instant_time)
        if instant.state is State.INFLIGHT:
            if _recovered(table, instant, plan):
                result.duration_seconds = time.monotonic() - started
                return result
            abort_indexing(table.storage, instant_time, plan.partitions, keep_plan=True)
            result.rolled_back.append(instant_time)
        reasons = hudi_refusals(table, plan.partitions)
        if reasons:
            raise UnsupportedTableError(
                f"cannot build {', '.join(plan.partitions)} with Hudi's code: {'; '.join(reasons)}"
            )
        if on_stage is not None:
            on_stage(HUDI_STAGE)
        with _write_client(spark, table, plan.partitions) as client:
            try:
                client.index(instant_time)
            except BaseException:
                # Hudi aborts only on I/O errors: whatever it left goes, its plan stays
                abort_indexing(table.storage, instant_time, plan.partitions, keep_plan=True)
                raise
        built = table.timeline().get(instant_time)
        if built is None or not built.is_completed:
            result.state = "MISSING" if built is None else built.state.name
        result.file_groups = _file_groups(table, plan.partitions)
        result.duration_seconds = time.monotonic() - started
        return result


def _recovered(table: HudiTable, instant: Instant, plan: IndexPlan) -> bool:
    """A crashed run that had listed its partitions built (Hudi does that just before it
    completes the instant): the instant is completed, as Hudi would have. False otherwise."""
    config = TableConfig.load(table.storage)
    if not all(p in config.metadata_partitions for p in plan.partitions):
        return False
    complete_indexing(table.storage, instant, plan, plan.up_to, {})
    return True


def _file_groups(table: HudiTable, partitions: Sequence[str]) -> int:
    """File groups of the built partitions in the metadata table."""
    reader = MetadataTableReader.open(table.storage)
    built = [p for p in partitions if p in reader.partitions]
    view = FileSystemView.build(reader.storage, reader.timeline, partitions=built)
    return sum(len(view.latest_file_slices(partition)) for partition in built)
