"""A table's layout as a snapshot reader meets it: its latest file slices (a pending
compaction's log-only slice merged into the one before, as `latest_merged_file_slices`
gives them), their log files, base file sizes and small base files.

These are the costs readers pay between table services: every log file of a latest slice
is merged by a snapshot read, every small base file is one more file a scan opens. A
measurement reads the timeline and lists the partitions (no data file is opened).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.files.fs_view import FileSlice
from tms.hudi.table import HudiTable
from tms.measure.stats import Spread, spread

__all__ = [
    "DEFAULT_SMALL_FILE_LIMIT",
    "SMALL_FILE_LIMIT_KEY",
    "WORST_PARTITIONS",
    "LayoutMeasurement",
    "PartitionSmallFiles",
    "layout_of",
    "measure_table",
]

SMALL_FILE_LIMIT_KEY = "hoodie.parquet.small.file.limit"
"""Hudi's writer setting: base files below it are small (new inserts go to them)."""
DEFAULT_SMALL_FILE_LIMIT = 104_857_600
"""Hudi's default of `hoodie.parquet.small.file.limit` (100 MiB)."""
WORST_PARTITIONS = 5
"""Partitions with the most small files a measurement names."""


@dataclass(frozen=True)
class PartitionSmallFiles:
    """One partition's small base files, of its base files."""

    partition: str
    small_files: int
    base_files: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "small_files": self.small_files,
            "base_files": self.base_files,
        }


@dataclass(frozen=True)
class LayoutMeasurement:
    """The figures of one table's latest file slices (see the module doc)."""

    partitions: int
    file_slices: int
    slices_with_log_files: int
    log_files_per_slice: Spread
    """Log files of each latest slice (slices without any count as 0)."""
    log_bytes_per_slice: Spread
    """Bytes of log files of each latest slice (slices without any count as 0)."""
    base_file_bytes: Spread
    """Sizes of the latest slices' base files (slices still without one are left out)."""
    small_file_limit: int
    small_file_limit_source: str
    """Where the limit came from: `policy`, `table` (hoodie.properties) or `default`."""
    small_files: int
    """Base files smaller than `small_file_limit`."""
    small_file_bytes: int
    worst_partitions: tuple[PartitionSmallFiles, ...] = field(default=())
    """The partitions with the most small files (at most `WORST_PARTITIONS`), most first."""

    @property
    def read_log_files(self) -> int:
        """Log files a snapshot read of the latest slices merges."""
        return self.log_files_per_slice.total

    @property
    def read_log_bytes(self) -> int:
        """Bytes of log files a snapshot read of the latest slices merges."""
        return self.log_bytes_per_slice.total

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions,
            "file_slices": self.file_slices,
            "slices_with_log_files": self.slices_with_log_files,
            "log_files_per_slice": self.log_files_per_slice.to_dict(),
            "log_bytes_per_slice": self.log_bytes_per_slice.to_dict(),
            "base_file_bytes": self.base_file_bytes.to_dict(),
            "small_file_limit": self.small_file_limit,
            "small_file_limit_source": self.small_file_limit_source,
            "small_files": self.small_files,
            "small_file_bytes": self.small_file_bytes,
            "worst_partitions": [p.to_dict() for p in self.worst_partitions],
            "read_amplification": {
                "log_files": self.read_log_files,
                "log_bytes": self.read_log_bytes,
                "small_files": self.small_files,
            },
        }


def layout_of(
    slices: Iterable[FileSlice],
    partitions: int,
    small_file_limit: int,
    small_file_limit_source: str = "default",
) -> LayoutMeasurement:
    """The measurement of `slices` (the latest of a table, over `partitions` partitions)."""
    slices = list(slices)
    bases = [s.base_file.size for s in slices if s.base_file is not None]
    small = [s for s in slices if s.base_file is not None and s.base_file.size < small_file_limit]
    return LayoutMeasurement(
        partitions=partitions,
        file_slices=len(slices),
        slices_with_log_files=sum(1 for s in slices if s.log_files),
        log_files_per_slice=spread([len(s.log_files) for s in slices]),
        log_bytes_per_slice=spread([s.log_size for s in slices]),
        base_file_bytes=spread(bases),
        small_file_limit=small_file_limit,
        small_file_limit_source=small_file_limit_source,
        small_files=len(small),
        small_file_bytes=sum(s.base_file.size for s in small if s.base_file is not None),
        worst_partitions=_worst_partitions(slices, small),
    )


def _worst_partitions(
    slices: list[FileSlice], small: list[FileSlice]
) -> tuple[PartitionSmallFiles, ...]:
    small_per = Counter(s.partition_path for s in small)
    bases_per = Counter(s.partition_path for s in slices if s.base_file is not None)
    worst = sorted(small_per.items(), key=lambda item: (-item[1], item[0]))[:WORST_PARTITIONS]
    return tuple(PartitionSmallFiles(p, n, bases_per[p]) for p, n in worst)


def small_file_limit(
    table_properties: Mapping[str, str], policy_limit: int | None
) -> tuple[int, str]:
    """The small-file limit and its source: the table policy's, else the table's
    `hoodie.parquet.small.file.limit` (when its hoodie.properties carries a positive one),
    else Hudi's default."""
    if policy_limit is not None and policy_limit > 0:
        return policy_limit, "policy"
    raw = table_properties.get(SMALL_FILE_LIMIT_KEY, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw), "table"
    return DEFAULT_SMALL_FILE_LIMIT, "default"


def measure_table(table: HudiTable, policy_limit: int | None = None) -> LayoutMeasurement:
    """Measure `table` as of its latest completed instant (reads its timeline and lists
    its partitions: blocking storage calls)."""
    view = table.file_system_view(table.timeline())
    limit, source = small_file_limit(table.config.props, policy_limit)
    return layout_of(view.latest_merged_file_slices(), len(view.partitions), limit, source)
