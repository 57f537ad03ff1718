"""A task's local paths for a table's files: a large file is read through a local file, a
block or a batch at a time, never whole in memory (one GET per file on an object store)."""

from __future__ import annotations

import os

from tms.hudi.storage import Storage

__all__ = ["LocalCopies"]


class LocalCopies:
    """Local paths of files of `storage`: in place on a local file system, else copies
    downloaded into `workdir` (which the caller removes)."""

    def __init__(self, storage: Storage, workdir: str) -> None:
        self.storage = storage
        self.workdir = workdir
        self.copied = 0

    def local(self, path: str) -> str:
        if self.storage.is_local:
            return self.storage.full_path(path)
        self.copied += 1
        local = os.path.join(self.workdir, f"copy-{self.copied}-{os.path.basename(path)}")
        self.storage.download(path, local)
        return local
