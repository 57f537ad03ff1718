"""A table's measurements: its latest file slices' layout on storage, its write rate and its
table services' cost (`tms.measure`, `tms.store.measure_sources`), one per sweep turn."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "LayoutOut",
    "MeasurementOut",
    "MeasurementsOut",
    "PartitionSmallFilesOut",
    "ReadAmplificationOut",
    "ServiceCostOut",
    "SpreadOut",
    "WritesOut",
]

Status = Literal["measured", "skipped", "failed"]


class SpreadOut(BaseModel):
    """Nearest-rank order statistics: each figure is one real value (0s when none)."""

    count: int
    total: int
    p5: int
    p50: int
    p95: int
    max: int


class PartitionSmallFilesOut(BaseModel):
    partition: str = Field(description="the partition path ('' for the table's root)")
    small_files: int
    base_files: int


class ReadAmplificationOut(BaseModel):
    """What readers pay until a table service runs."""

    log_files: int = Field(description="log files a snapshot read of the latest slices merges")
    log_bytes: int = Field(description="their bytes")
    small_files: int = Field(description="base files under the small-file limit a scan opens")


class LayoutOut(BaseModel):
    """The latest file slices, a pending compaction's log-only slice merged into the one
    before (what a snapshot read merges)."""

    partitions: int
    file_slices: int
    slices_with_log_files: int
    log_files_per_slice: SpreadOut
    log_bytes_per_slice: SpreadOut
    base_file_bytes: SpreadOut = Field(description="sizes of the latest slices' base files")
    small_file_limit: int
    small_file_limit_source: Literal["policy", "table", "default"] = Field(
        description="the table policy's small_file_limit, the table's "
        "hoodie.parquet.small.file.limit, or Hudi's default 104857600"
    )
    small_files: int = Field(description="base files smaller than the small-file limit")
    small_file_bytes: int
    worst_partitions: list[PartitionSmallFilesOut] = Field(
        description="the partitions with the most small files (at most 5), most first"
    )
    read_amplification: ReadAmplificationOut


class WritesOut(BaseModel):
    """The writers' commits, delta commits and replacecommits the store recorded in the
    window (the last 24 hours, or since registration when shorter)."""

    window_hours: float
    commits: int
    records: int
    bytes: int
    files: int
    log_files: int
    log_bytes: int
    commits_per_hour: float
    records_per_hour: float
    bytes_per_hour: float


class ServiceCostOut(BaseModel):
    """One table service's attempts that ended in the window, and their cost."""

    attempts: int
    succeeded: int
    failed: int = Field(description="attempts that did not succeed (failed, lost, cancelled)")
    wall_seconds: float = Field(description="launch to end, summed")
    executor_seconds: float = Field(
        description="reported by the job, else the service's run time x its Spark tasks (one "
        "per file group; an upper bound), else the attempt's wall time"
    )
    executor_seconds_basis: dict[str, int] = Field(
        description="attempts per basis: reported, wall_x_tasks, wall"
    )
    bytes_written: int
    bytes_read: int | None = Field(description="null while the service's jobs report none")
    files_written: int
    file_groups: int


class MeasurementOut(BaseModel):
    measured_at: datetime
    status: Status = Field(
        description="measured; skipped (the table is paused); failed (its storage failed "
        "or took longer than TMS_MEASURE_TIMEOUT_SECONDS)"
    )
    reason: str | None = Field(description="why it was skipped or failed")
    layout: LayoutOut | None
    writes: WritesOut | None
    services: dict[str, ServiceCostOut] | None = Field(
        description="per table service (action) with attempts in the window"
    )


class MeasurementsOut(BaseModel):
    table_id: int
    latest: MeasurementOut | None = Field(
        description="the newest measurement with figures (null: none yet)"
    )
    items: list[MeasurementOut] = Field(description="the history asked for, newest first")

    @classmethod
    def row(cls, row: Any) -> MeasurementOut:
        """A stored `TableMeasurement` as the API shows it."""
        return MeasurementOut(
            measured_at=row.measured_at,
            status=row.status,
            reason=row.reason,
            layout=row.layout,
            writes=row.writes,
            services=row.services,
        )
