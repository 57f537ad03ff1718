"""Hudi's view DTOs (`org.apache.hudi.common.table.timeline.dto`) as JSON-ready dicts.

Field names are the `@JsonProperty` names of Hudi's classes. File paths are the client's
own base path (the `basepath` it sent) joined with the path inside the table, so the
client gets back paths spelled as it spells its table. `FileStatusDTO` carries the fields of
both the 0.x class (Hadoop's `FileStatus`: access time, permission, owner, group, symlink,
left empty) and the 1.x one (`StoragePathInfo`); each client ignores what it does not know.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from tms.hudi.files.fs_view import BaseFile, FileGroup, FileSlice, LogFile
from tms.hudi.timeline.instant import Instant
from tms.view.snapshot import PendingClustering, PendingOperation, Snapshot, data_file_commit_time
from tms.view.visible_timeline import instant_dto, timeline_dto

__all__ = ["DtoWriter"]

BLOCK_SIZE = 32 * 1024 * 1024
"""What Hadoop's local and S3A file systems report as a file's block size by default."""


class DtoWriter:
    """Builds the DTOs of one snapshot for one client base path."""

    def __init__(self, snapshot: Snapshot, base_path: str) -> None:
        self.snapshot = snapshot
        self.base_path = base_path.rstrip("/")

    def full_path(self, path: str) -> str:
        return posixpath.join(self.base_path, path) if path else self.base_path

    def file_status(self, path: str, size: int) -> dict[str, Any]:
        full = self.full_path(path)
        modified = self.snapshot.modified.get(path, 0.0)
        return {
            "path": {"uri": full},
            "length": size,
            "isdir": False,
            "blockReplication": 1,
            "blocksize": BLOCK_SIZE,
            "modificationTime": int(modified * 1000),
            "accessTime": 0,
            "permission": None,
            "owner": None,
            "group": None,
            "symlink": None,
        }

    def base_file(self, base: BaseFile | None) -> dict[str, Any] | None:
        """`BaseFileDTO`."""
        if base is None:
            return None
        return {
            "fileStatus": self.file_status(base.path, base.size),
            "fullPath": self.full_path(base.path),
            "fileLen": base.size,
            "commitTime": base.name.instant_time,
            "fileId": base.name.file_id,
            "bootstrapBaseFile": None,
        }

    def log_file(self, log: LogFile) -> dict[str, Any]:
        """`LogFileDTO`."""
        return {
            "fileStatus": self.file_status(log.path, log.size),
            "path": self.full_path(log.path),
            "len": log.size,
        }

    def file_slice(self, piece: FileSlice) -> dict[str, Any]:
        """`FileSliceDTO`, log files newest first as `FileSlice.getLogFiles` gives them."""
        return {
            "baseFile": self.base_file(piece.base_file),
            "logFiles": [self.log_file(log) for log in reversed(piece.log_files)],
            "partition": piece.partition_path,
            "fileId": piece.file_id,
            "baseInstant": piece.base_instant_time,
        }

    def file_slices(self, pieces: Iterable[FileSlice]) -> list[dict[str, Any]]:
        return [self.file_slice(p) for p in pieces]

    def base_files(self, bases: Iterable[BaseFile]) -> list[dict[str, Any]]:
        return [d for d in (self.base_file(b) for b in bases) if d is not None]

    def file_groups(self, groups: list[FileGroup]) -> list[dict[str, Any]]:
        """`FileGroupDTO`s as `DTOUtils.fileGroupDTOsfromFileGroups` sends them: the file
        groups' timeline (the write timeline) only on the first."""
        timeline = timeline_dto(self.snapshot.write_timeline)
        return [
            {
                "partition": group.partition_path,
                "fileId": group.file_id,
                "slices": [self.file_slice(s) for s in reversed(group.slices)],
                "timeline": timeline if i == 0 else None,
            }
            for i, group in enumerate(groups)
        ]


def compaction_op(pending: PendingOperation) -> dict[str, Any]:
    """`CompactionOpDTO` of one plan operation, read as Hudi's
    `CompactionOperation.convertFromAvroRecordInstance` reads it."""
    op: Mapping[str, Any] = pending.operation
    data_file = op.get("dataFilePath") or None
    metrics = op.get("metrics") or {}
    return {
        "baseInstant": op.get("baseInstantTime"),
        "compactionInstant": pending.instant_time,
        "dataFileInstant": data_file_commit_time(data_file),
        "deltaFiles": list(op.get("deltaFilePaths") or []),
        "baseFile": data_file,
        "id": op.get("fileId"),
        "partition": op.get("partitionPath") or "",
        "metrics": {str(k): float(v) for k, v in metrics.items()},
        "externalBaseFile": op.get("bootstrapFilePath") or None,
    }


def clustering_op(pending: PendingClustering) -> dict[str, Any]:
    """`ClusteringOpDTO`: the file group and the clustering's requested instant."""
    return {
        "id": pending.file_id,
        "partition": pending.partition,
        "instantTime": pending.instant_time,
        "instantState": "REQUESTED",
        "instantAction": pending.action.value,
    }


def last_instant(instant: Instant | None) -> list[dict[str, Any]]:
    """The last-instant answer: a list of at most one `InstantDTO`."""
    return [instant_dto(instant)] if instant is not None else []
