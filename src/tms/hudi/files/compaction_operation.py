"""One `HoodieCompactionOperation` of a compaction plan: the file slice of one file group,
named by file names (plan version 2), as the data table's and the metadata table's compactions
both write and read it."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.names import BaseFileName, LogFileName

__all__ = ["CompactionOperation"]


@dataclass(frozen=True)
class CompactionOperation:
    """The slice of one file group to compact."""

    partition_path: str
    file_id: str
    base_instant_time: str
    data_file_name: str | None
    delta_file_names: tuple[str, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)

    def to_avro(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant_time,
            "deltaFilePaths": list(self.delta_file_names),
            "dataFilePath": self.data_file_name,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": None,
        }

    def path(self, file_name: str) -> str:
        return posixpath.join(self.partition_path, file_name) if self.partition_path else file_name

    def file_slice(self) -> FileSlice:
        """The slice as the plan names it (sizes unknown: only the files are read); a file that
        is not a data file of this file group is refused (`ValueError`)."""
        base = None
        if self.data_file_name:
            name = BaseFileName.parse(self.data_file_name)
            if name is None or name.file_id != self.file_id:
                raise ValueError(f"plan names a foreign base file {self.data_file_name!r}")
            base = BaseFile(name, self.path(self.data_file_name), 0)
        logs = []
        for log_name in self.delta_file_names:
            parsed = LogFileName.parse(log_name)
            if parsed is None or parsed.file_id != self.file_id:
                raise ValueError(f"plan names a foreign log file {log_name!r}")
            logs.append(LogFile(parsed, self.path(log_name), 0))
        return FileSlice(
            self.partition_path, self.file_id, self.base_instant_time, base, tuple(logs)
        )
