"""Building new metadata partitions from the data table's latest file slices, on Spark."""

from __future__ import annotations

from typing import Any

from tms.hudi.metadata.index_build.spec import IndexSpec, IndexWrite
from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import Timeline

__all__ = ["build_partitions"]


def build_partitions(
    spark: Any,
    table: HudiTable,
    spec: IndexSpec,
    *,
    as_of: str,
    instant_time: str,
    timeline: Timeline | None = None,
) -> IndexWrite:
    """Index the latest file slices as of `as_of` into the new partitions of `spec`, written
    as the metadata table's completed delta commit `instant_time` of base HFiles."""
    raise NotImplementedError("build_partitions")
