"""The data table's file-system view planned from the metadata table's `files` partition instead
of storage listings (Hudi's `HoodieMetadataFileSystemView`; what hudi-rs does whenever the
table lists `files` among its metadata partitions)."""

from __future__ import annotations

import posixpath
import time
from collections.abc import Mapping

from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.files.names import PARTITION_METADATA
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import FileInfo, Storage

__all__ = ["MetadataListing", "metadata_file_system_view"]


class MetadataListing(Storage):
    """A `Storage` whose directory listings of the data table come from the `files` partition;
    reads of file contents still go to storage."""

    def __init__(self, storage: Storage, files: Mapping[str, Mapping[str, int]]) -> None:
        super().__init__(storage.root, fs=storage.fs)
        self.base_path = storage.base_path
        self._files = {partition: dict(names) for partition, names in files.items()}
        self._dirs: set[str] = {""}
        for partition in self._files:
            parts = partition.split("/") if partition else []
            self._dirs.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
        self._listed_at = time.time()

    def _entry(self, path: str, size: int, is_dir: bool) -> FileInfo:
        return FileInfo(path=path, size=size, is_dir=is_dir, modified=self._listed_at)

    def list_dir(self, path: str) -> list[FileInfo]:
        entries = [
            self._entry(d, 0, True)
            for d in sorted(self._dirs)
            if d and posixpath.dirname(d) == path
        ]
        if path in self._files:
            join = (lambda n: posixpath.join(path, n)) if path else (lambda n: n)
            entries.append(self._entry(join(PARTITION_METADATA), 0, False))
            files = sorted(self._files[path].items())
            entries += [self._entry(join(name), size, False) for name, size in files]
        return entries

    def exists(self, path: str) -> bool:
        if path in self._dirs:
            return True
        partition, name = posixpath.split(path)
        return name in self._files.get(partition, {})


def metadata_file_system_view(reader: MetadataTableReader) -> FileSystemView:
    """File groups and slices of the data table as the metadata table lists its files."""
    listing = MetadataListing(reader.data_storage, reader.all_files())
    return FileSystemView.build(listing, reader.data_timeline)
