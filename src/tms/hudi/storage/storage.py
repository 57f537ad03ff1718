"""Storage behind one small interface, the same on local disk and on object stores.

Every path handed to `Storage` is relative to the table's base path and uses `/`. Each
method records the requests it issues on an object store (`tms.hudi.storage.requests`).

Object stores differ from a disk in three ways the methods absorb:
- no rename: a whole-object PUT is atomic (readers see the old object or the new one,
  never part of one), so atomic writes write directly; a disk writes a temporary file and
  renames it;
- create-if-absent is a conditional PUT (`If-None-Match: *`) where the store has one;
- no directories: a prefix exists while a key lies below it, `makedirs` does nothing, and
  listing a missing prefix is empty, as listing a missing directory is here.

On a local disk Hudi writes through Hadoop's `LocalFileSystem`, which keeps a checksum file
`.<name>.crc` next to each file it writes and refuses to read a file that no longer matches it
(`ChecksumException`, surfacing as "Could not load Hoodie properties"). A file written or
deleted here loses its checksum file, so Hadoop reads the new contents unchecked, as it does
any file without one.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tms.hudi.storage.byte_range import RangeFile
from tms.hudi.storage.requests import (
    RequestKind,
    delete_requests,
    list_requests,
    put_requests,
    record,
)
from tms.hudi.storage.retry import RetryPolicy, call_with_retries, policy
from tms.hudi.storage.schemes import filesystem, is_local, is_s3

WRITE_ID = "tms-write-id"
"""User metadata of an object written by `create_new`: the write's own id, to tell after a
lost answer whether the object that is there is the one this call wrote."""

T = TypeVar("T")


def _drop_hadoop_checksum(full: str) -> None:
    """Remove the checksum file Hadoop's `LocalFileSystem` keeps for the local file `full`
    (absent for files Hadoop did not write)."""
    folder, name = os.path.split(full)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(folder, f".{name}.crc"))


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
    """A base path on a filesystem: read, write, list and delete by relative path.

    `storage_options` (credentials, endpoint) go to fsspec and nowhere else: not into
    `repr`, logs or error messages.
    """

    def __init__(
        self,
        base_path: str,
        fs: Any | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if fs is None:
            fs, root = filesystem(base_path, storage_options)
        else:
            root = base_path
            if "://" not in base_path and not is_local(fs):
                base_path = fs.unstrip_protocol(root)
        self.fs: Any = fs
        self.root: str = str(root).rstrip("/") or "/"
        self.base_path = base_path.rstrip("/")
        self._local = is_local(fs)
        self._s3 = is_s3(fs)
        self._retry = RetryPolicy(attempts=1) if self._local else policy()

    def __repr__(self) -> str:
        return f"Storage({self.base_path!r})"

    def full_path(self, path: str) -> str:
        """The filesystem path of a relative path."""
        return posixpath.join(self.root, path) if path else self.root

    def uri(self, path: str) -> str:
        """A path usable outside this object: by Spark tasks, pyarrow or the `hudi` reader."""
        return posixpath.join(self.base_path, path) if path else self.base_path

    def exists(self, path: str) -> bool:
        """A file, or a directory (on object stores: a prefix with a key below it).

        HEAD, then a LIST when no object has that name."""
        return self._stat(path) is not None

    def read_bytes(self, path: str) -> bytes:
        """One GET of the whole object. s3fs would first send a HEAD for the size, to split a
        large object into concurrent ranged GETs: asked for one stream, it sends the GET
        alone, so what S3 bills is what is counted here."""
        record(RequestKind.GET)
        options = {"max_concurrency": 1} if self._s3 else {}
        full = self.full_path(path)
        data: bytes = self._retried(RequestKind.GET, lambda: self.fs.cat_file(full, **options))
        return data

    def read_tail(self, path: str, length: int) -> bytes:
        """The last `length` bytes of a file (all of it when shorter): one GET of a suffix
        range, with no HEAD for the size first."""
        record(RequestKind.GET)
        full = self.full_path(path)
        data: bytes = self._retried(RequestKind.GET, lambda: self.fs.cat_file(full, start=-length))
        return data

    def open_input(self, path: str) -> io.BytesIO:
        """A file object for readers that take one (Parquet), read with one GET of the whole
        object: the services read base files whole, and one request is cheaper than a
        footer's and each column chunk's range requests."""
        return io.BytesIO(self.read_bytes(path))

    def open_ranged(self, path: str) -> RangeFile:
        """A seekable file, unbuffered, each read one ranged GET of the bytes asked for (a
        HEAD first, for the size): Parquet's reader, asked for a few columns of a large
        file, fetches its footer and those column chunks, not the object."""
        return RangeFile(lambda at, n: self.read_range(path, at, at + n), self.info(path).size)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes `start` to `end` (exclusive) of a file: one GET of that range."""
        record(RequestKind.GET)
        full = self.full_path(path)
        data: bytes = self._retried(
            RequestKind.GET, lambda: self.fs.cat_file(full, start=start, end=end)
        )
        return data

    @property
    def is_local(self) -> bool:
        """Files are on this machine's file system (`full_path` is a path `open` takes)."""
        return self._local

    def download(self, path: str, local: str) -> None:
        """One GET of the whole object, streamed into the local file `local`: a large file
        read through a local copy, never whole in memory."""
        record(RequestKind.GET)
        full = self.full_path(path)
        self._retried(RequestKind.GET, lambda: self.fs.get_file(full, local))

    def move_in(self, local: str, path: str) -> None:
        """The local file `local` becomes `path`: renamed into place on a local file system,
        streamed up on an object store (a multipart upload past its part size) and then
        removed. Data files only: not atomic, like `write_bytes(atomic=False)`."""
        size = os.path.getsize(local)
        record(RequestKind.PUT, put_requests(size))
        full = self.full_path(path)
        if self._local:
            self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
            _drop_hadoop_checksum(full)
            shutil.move(local, full)
            return
        self._retried(RequestKind.PUT, lambda: self.fs.put_file(local, full))
        os.remove(local)

    def write_bytes(self, path: str, data: bytes, *, atomic: bool = True) -> None:
        """Write a whole file at once.

        Atomic (the default, for timeline files): readers see either nothing or all of it.
        On disk a temporary file is renamed; on an object store the one PUT of the whole
        object is atomic already. Data files are written in place instead: a marker names
        each one before it is written, so a crash leaves nothing a rollback cannot find.
        """
        record(RequestKind.PUT, put_requests(len(data)))
        full = self.full_path(path)
        if not self._local:
            self._retried(RequestKind.PUT, lambda: self.fs.pipe_file(full, data))
            return
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        if atomic:
            tmp = self._temporary(full)
            with self.fs.open(tmp, "wb") as out:
                out.write(data)
            _drop_hadoop_checksum(full)
            self.fs.mv(tmp, full)
        else:
            _drop_hadoop_checksum(full)
            with self.fs.open(full, "wb") as out:
                out.write(data)

    @property
    def appends(self) -> bool:
        """Whether `append_bytes` adds to a file in place (local and mounted file systems);
        object stores have no append, so a growing file is rewritten whole there."""
        return self._local

    def append_bytes(self, path: str, data: bytes) -> None:
        """Add `data` at the end of a file (created when missing). Only where `appends`: a
        crash may leave the last addition torn, so readers drop an unfinished last line."""
        if not self._local:
            raise io.UnsupportedOperation(f"{self.base_path}: this storage cannot append")
        record(RequestKind.PUT, put_requests(len(data)))
        full = self.full_path(path)
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        with open(full, "ab") as out:
            out.write(data)

    def create_new(self, path: str, data: bytes) -> None:
        """Write a whole file only if none has that name; `FileExistsError` otherwise.

        On disk a complete temporary file is hard-linked to the name, which fails when the
        name exists, so readers never see part of it. On an object store it is one
        conditional PUT (`If-None-Match: *`): S3 (since 2024-08), GCS and Azure refuse it
        when the key exists, atomically. A store without conditional writes (some
        S3-compatible ones) ignores the header: there a writer needs the table lock, as
        Hudi requires a lock provider for concurrent writers.

        A conditional PUT is not blindly repeated: when a try got no answer and a repeat
        finds the name taken, the object is this call's own only if it carries the call's
        write id (`WRITE_ID`); otherwise another writer holds the name.
        """
        record(RequestKind.PUT, put_requests(len(data)))
        full = self.full_path(path)
        if not self._local:
            self._create_object(full, data)
            return
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        tmp = self._temporary(full)
        with self.fs.open(tmp, "wb") as out:
            out.write(data)
        try:
            os.link(tmp, full)
        finally:
            os.unlink(tmp)

    def touch(self, path: str) -> None:
        """Create the file or refresh its modification time (heartbeats).

        An object's modification time changes only when it is written: on object stores the
        file is written anew, empty (heartbeat files are empty), as Hudi's heartbeat does."""
        record(RequestKind.PUT)
        full = self.full_path(path)
        if not self._local:
            self._retried(RequestKind.PUT, lambda: self.fs.pipe_file(full, b""))
            return
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        self.fs.touch(full, truncate=False)

    def makedirs(self, path: str) -> None:
        """A directory on disk; nothing on object stores, where prefixes need no creating."""
        if self._local:
            self.fs.makedirs(self.full_path(path), exist_ok=True)

    def delete(self, path: str) -> bool:
        """Delete a file; False when it was already gone (deletes are retried after crashes).

        Object stores answer a DELETE of a missing key as a success: there it is True."""
        record(RequestKind.DELETE)
        full = self.full_path(path)
        try:
            self._retried(RequestKind.DELETE, lambda: self.fs.rm_file(full))
        except FileNotFoundError:
            return False
        finally:
            if self._local:
                _drop_hadoop_checksum(full)
        return True

    def delete_dir(self, path: str) -> None:
        """Delete a directory and everything below it; nothing when it does not exist."""
        full = self.full_path(path)
        files = self._find(path)
        if not files:
            return
        record(RequestKind.DELETE, delete_requests(len(files)))
        if self._local:
            self.fs.rm(full, recursive=True)
        else:
            self._retried(RequestKind.DELETE, lambda: self.fs.rm(list(files)))

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children of a directory; empty when it does not exist."""
        full = self.full_path(path)
        entries: list[dict[str, Any]]
        if self._s3:
            # One delimited listing of the keys below `full/`: s3fs's `ls(full)` follows an
            # empty listing with a listing of the whole parent, to find a file named `full`.
            parent, name = posixpath.split(full)
            found = self._retried(
                RequestKind.LIST,
                lambda: self.fs.find(
                    parent, prefix=f"{name}/", maxdepth=1, withdirs=True, detail=True
                ),
            )
            entries = [entry for key, entry in found.items() if key.rstrip("/") != full]
        else:
            try:
                entries = self.fs.ls(full, detail=True)
            except FileNotFoundError:
                entries = []
        record(RequestKind.LIST, list_requests(len(entries)))
        return [self._info(entry) for entry in entries]

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        """Every file below a directory, at any depth: one flat listing (on object stores a
        LIST per 1,000 keys, not one per directory)."""
        for entry in self._find(path).values():
            yield self._info(entry)

    def info(self, path: str) -> FileInfo:
        """HEAD, then a LIST when no object has that name; `FileNotFoundError` for neither."""
        entry = self._stat(path)
        if entry is None:
            raise FileNotFoundError(self.uri(path))
        return self._info(entry)

    def modified(self, path: str) -> float:
        return self.info(path).modified

    def _stat(self, path: str) -> dict[str, Any] | None:
        """The filesystem's info of a path, None when absent; counted as an object store
        answers it: HEAD, and a LIST of the prefix unless an object has that name."""
        record(RequestKind.HEAD)
        try:
            full = self.full_path(path)
            entry: dict[str, Any] = self._retried(RequestKind.HEAD, lambda: self.fs.info(full))
        except (FileNotFoundError, NotADirectoryError):  # on disk, a file may stand above it
            entry = {}
        if entry.get("type") != "file":
            record(RequestKind.LIST)
        return entry or None

    def _find(self, path: str) -> dict[str, dict[str, Any]]:
        """The files below a directory by filesystem path (none when it does not exist)."""
        full = self.full_path(path)
        found: dict[str, dict[str, Any]]
        if self._s3:
            # A listing of the keys below `full/`: s3fs's `find(full)` follows an empty
            # listing with a HEAD and another LIST, to tell a file named `full` apart.
            parent, name = posixpath.split(full)
            found = self._retried(
                RequestKind.LIST, lambda: self.fs.find(parent, prefix=f"{name}/", detail=True)
            )
        else:
            found = self.fs.find(full, detail=True)
        record(RequestKind.LIST, list_requests(len(found)))
        return {
            name: entry
            for name, entry in found.items()
            if entry.get("type") == "file" and name != full and not name.endswith("/")
        }

    def _retried(self, kind: RequestKind, call: Callable[[], T]) -> T:
        """A call safe to repeat, retried on a transient failure of the object store."""
        return call_with_retries(kind, call, self._retry)

    def _create_object(self, full: str, data: bytes) -> None:
        """One conditional PUT, repeated after a try with no answer; a refusal because the
        name is taken is a success if the object there is this call's: a try whose answer
        was lost may have written it (and the HTTP client itself resends a PUT, an
        idempotent method to HTTP, once when a kept-alive connection drops)."""
        write_id = uuid.uuid4().hex
        try:
            self._retried(
                RequestKind.PUT,
                lambda: self.fs.pipe_file(full, data, mode="create", Metadata={WRITE_ID: write_id}),
            )
        except FileExistsError:
            if self._write_id(full) != write_id:
                raise

    def _write_id(self, full: str) -> str | None:
        record(RequestKind.HEAD)
        metadata: dict[str, str] = self._retried(RequestKind.HEAD, lambda: self.fs.metadata(full))
        return {k.lower(): v for k, v in metadata.items()}.get(WRITE_ID)

    @staticmethod
    def _temporary(full: str) -> str:
        return f"{full}.{uuid.uuid4().hex}.tmp"

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
