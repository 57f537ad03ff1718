"""Bringing partitions built at one instant forward over the instants completed since."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tms.hudi.metadata.index_build.spec import IndexSpec, IndexWrite
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Instant
from tms.hudi.timeline.timeline import Timeline

__all__ = ["catch_up"]


def catch_up(
    spark: Any,
    table: HudiTable,
    spec: IndexSpec,
    instants: Sequence[Instant],
    *,
    since: str,
    until: str,
    instant_time: str,
    timeline: Timeline | None = None,
) -> IndexWrite:
    """Apply the completed data instants after `since` up to `until` to the partitions of
    `spec`, as the metadata table's completed delta commit `instant_time` of log files."""
    raise NotImplementedError("catch_up")
