"""Storage behind one small interface, so object stores can follow the local filesystem.

Every path handed to `Storage` is relative to the table's base path and uses `/`.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fsspec


@dataclass(frozen=True)
class FileInfo:
    """One entry of a directory listing."""

    path: str
    """Path relative to the storage root."""
    size: int
    is_dir: bool
    modified: float
    """Modification time, seconds since the epoch."""

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


class Storage:
    """A base path on a filesystem: read, write, list and delete by relative path."""

    def __init__(self, base_path: str, fs: Any | None = None) -> None:
        if fs is None:
            fs, root = fsspec.core.url_to_fs(base_path)
        else:
            root = base_path
        self.fs: Any = fs
        self.root: str = str(root).rstrip("/") or "/"
        self.base_path = base_path.rstrip("/")

    def full_path(self, path: str) -> str:
        """The filesystem path of a relative path."""
        return posixpath.join(self.root, path) if path else self.root

    def uri(self, path: str) -> str:
        """A path usable outside this object: by Spark tasks, pyarrow or the `hudi` reader."""
        return posixpath.join(self.base_path, path) if path else self.base_path

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self.full_path(path)))

    def read_bytes(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(self.full_path(path))
        return data

    def write_bytes(self, path: str, data: bytes, *, atomic: bool = True) -> None:
        """Write a whole file at once.

        Atomic (the default, for timeline files): readers see either nothing or all of it.
        Data files are written in place instead: a marker names each one before it is
        written, so a crash leaves nothing a rollback cannot find.
        """
        full = self.full_path(path)
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        if atomic and self._is_local:
            tmp = f"{full}.{uuid.uuid4().hex}.tmp"
            with self.fs.open(tmp, "wb") as out:
                out.write(data)
            self.fs.mv(tmp, full)
        else:
            with self.fs.open(full, "wb") as out:
                out.write(data)

    def touch(self, path: str) -> None:
        """Create the file or refresh its modification time (heartbeats)."""
        full = self.full_path(path)
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        self.fs.touch(full, truncate=False)

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(self.full_path(path), exist_ok=True)

    def delete(self, path: str) -> bool:
        """Delete a file; False when it was already gone (deletes are retried after crashes)."""
        try:
            self.fs.rm_file(self.full_path(path))
        except FileNotFoundError:
            return False
        return True

    def delete_dir(self, path: str) -> None:
        full = self.full_path(path)
        if self.fs.exists(full):
            self.fs.rm(full, recursive=True)

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children of a directory; empty when it does not exist."""
        full = self.full_path(path)
        try:
            entries = self.fs.ls(full, detail=True)
        except FileNotFoundError:
            return []
        return [self._info(entry) for entry in entries]

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        """Every file below a directory, at any depth."""
        for entry in self.list_dir(path):
            if entry.is_dir:
                yield from self.walk_files(entry.path)
            else:
                yield entry

    def info(self, path: str) -> FileInfo:
        return self._info(self.fs.info(self.full_path(path)))

    def modified(self, path: str) -> float:
        return self.info(path).modified

    @property
    def _is_local(self) -> bool:
        protocol = self.fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        return "file" in protocols or "local" in protocols

    def _info(self, entry: dict[str, Any]) -> FileInfo:
        name = str(entry["name"]).rstrip("/")
        rel = posixpath.relpath(name, self.root) if name != self.root else ""
        modified: Any = (
            entry.get("mtime") or entry.get("LastModified") or entry.get("last_modified")
        )
        if modified is not None and hasattr(modified, "timestamp"):
            modified = modified.timestamp()
        return FileInfo(
            path=rel,
            size=int(entry.get("size") or 0),
            is_dir=entry.get("type") == "directory",
            modified=float(modified) if modified is not None else time.time(),
        )
