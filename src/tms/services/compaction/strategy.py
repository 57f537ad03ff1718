"""Compaction plan strategies: which file slices with log files one compaction takes.

Hudi's `CompactionStrategy` family captures per-slice metrics into each plan operation and
then orders and filters the operations; ours do the same over our `FileSlice`s, so the
metrics we write into a plan are the ones Hudi's strategies (and operators) read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tms.hudi.files.fs_view import FileSlice

MIB = 1024 * 1024
DEFAULT_MAX_BASE_FILE_SIZE = 120 * MIB
"""`hoodie.parquet.max.file.size`: Hudi's expected write size of a slice without a base file."""
DEFAULT_TARGET_IO_MB = 500 * 1024
"""`hoodie.compaction.target.io`: the IO (MB) one compaction may take at most."""

# Keys of `HoodieCompactionOperation.metrics`, as Hudi's `FileSliceMetricUtils` names them.
TOTAL_IO_READ_MB = "TOTAL_IO_READ_MB"
TOTAL_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
TOTAL_IO_MB = "TOTAL_IO_MB"
TOTAL_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
TOTAL_LOG_FILES = "TOTAL_LOG_FILES"


def slice_metrics(
    file_slice: FileSlice, max_base_file_size: int = DEFAULT_MAX_BASE_FILE_SIZE
) -> dict[str, float]:
    """Hudi's common metrics of one slice: IO in whole MB (integer division), log size and count.

    Reading costs the base file plus every log file; writing costs about the base file again
    (or a full-size file when the slice has no base file yet).
    """
    base_size = file_slice.base_file.size if file_slice.base_file else 0
    log_size = file_slice.log_size
    read_mb = (base_size + log_size) // MIB
    write_mb = (base_size if base_size > 0 else max_base_file_size) // MIB
    return {
        TOTAL_IO_READ_MB: float(read_mb),
        TOTAL_IO_WRITE_MB: float(write_mb),
        TOTAL_IO_MB: float(read_mb + write_mb),
        TOTAL_LOG_FILES_SIZE: float(log_size),
        TOTAL_LOG_FILES: float(len(file_slice.log_files)),
    }


class CompactionStrategy(Protocol):
    """Picks, from the candidate slices (latest slices with log files, none of them already
    in a pending compaction or clustering), those one plan compacts, in plan order."""

    @property
    def name(self) -> str: ...

    def select(self, candidates: Sequence[FileSlice]) -> list[FileSlice]: ...


@dataclass(frozen=True)
class AllSlicesStrategy:
    """Every slice with log files (Hudi's `UnBoundedCompactionStrategy`)."""

    @property
    def name(self) -> str:
        return "all"

    def select(self, candidates: Sequence[FileSlice]) -> list[FileSlice]:
        return [s for s in candidates if s.has_log_files]


@dataclass(frozen=True)
class LogSizeStrategy:
    """Slices whose log files add up to at least `threshold_bytes`, largest logs first, taken
    while the plan's IO stays within `max_io_mb` (Hudi's
    `LogFileSizeThresholdBasedCompactionStrategy` over `BoundedIOCompactionStrategy`).

    As in Hudi, the slice that crosses the IO bound is still taken; None means no bound.
    """

    threshold_bytes: int = 0
    max_io_mb: int | None = DEFAULT_TARGET_IO_MB
    max_base_file_size: int = DEFAULT_MAX_BASE_FILE_SIZE

    def __post_init__(self) -> None:
        if self.threshold_bytes < 0:
            raise ValueError("threshold_bytes must not be negative")
        if self.max_io_mb is not None and self.max_io_mb <= 0:
            raise ValueError("max_io_mb must be positive (or None for no bound)")

    @property
    def name(self) -> str:
        return "log-size"

    def select(self, candidates: Sequence[FileSlice]) -> list[FileSlice]:
        eligible = [s for s in candidates if s.has_log_files and s.log_size >= self.threshold_bytes]
        ordered = sorted(eligible, key=lambda s: (-s.log_size, s.partition_path, s.file_id))
        if self.max_io_mb is None:
            return ordered
        chosen: list[FileSlice] = []
        remaining = float(self.max_io_mb)
        for file_slice in ordered:
            chosen.append(file_slice)
            remaining -= slice_metrics(file_slice, self.max_base_file_size)[TOTAL_IO_MB]
            if remaining <= 0:
                break
        return chosen


STRATEGIES: dict[str, type[AllSlicesStrategy] | type[LogSizeStrategy]] = {
    "all": AllSlicesStrategy,
    "log-size": LogSizeStrategy,
}


def strategy_by_name(name: str) -> CompactionStrategy:
    """The strategy a CLI or API caller names, with its default settings."""
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ValueError(
            f"unknown compaction strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}"
        ) from None
