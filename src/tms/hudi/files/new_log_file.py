"""The name of the next log file a delta commit writes into a file slice.

Timeline layout 2 names a log file by the delta commit writing it (readers place it by that
commit's completion time), so every delta commit starts at version 1. Layout 1 (table version
6) names it by the slice's base instant, and each delta commit takes the next version after
every log file of that slice already on storage (committed or not): object stores cannot
append, so Hudi 0.x rolls over to a new version there too.
"""

from __future__ import annotations

from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.names import LogFileName
from tms.hudi.timeline.layout import TimelineLayout

__all__ = ["next_log_file_name"]


def next_log_file_name(
    layout: TimelineLayout, file_slice: FileSlice, delta_commit: str, write_token: str
) -> LogFileName:
    """The log file `delta_commit` writes into `file_slice` (its writer's slice: a pending
    compaction's new slice where there is one)."""
    named_by = layout.log_file_instant(file_slice.base_instant_time, delta_commit)
    version = 1 + max(
        (
            log.name.version
            for log in file_slice.log_files
            if log.name.base_instant_time == named_by
        ),
        default=0,
    )
    return LogFileName(file_slice.file_id, named_by, version, write_token)
