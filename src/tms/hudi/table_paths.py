"""Paths named by a table's own files (plans, commit metadata, markers), confined to the table.

Plans and markers are files anyone who can write `.hoodie/` can craft, and the services delete
and write the files they name. Every such path is resolved here against the table's base path
and refused unless it stays inside the table: relative (or a full location under the base
path on the table's own file system), without `..`, empty or `.` components, control
characters or backslashes, not under `.hoodie/` where a data file is meant, and, on a local
file system, not through a symlink that leads out of the table. One check, used by every
service before it deletes or writes anything.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from fsspec.implementations.local import LocalFileSystem

from tms.hudi.errors import UnsafePathError
from tms.hudi.storage import Storage

__all__ = ["META_FOLDER", "TablePaths", "check_relative"]

META_FOLDER = ".hoodie"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
"""A URI scheme, as Hadoop's `Path` reads one before the first `/`."""
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")
_LOCAL_AUTHORITIES = ("", "localhost")
_LOCAL_SCHEMES = ("file", "local")


@dataclass(frozen=True)
class _Location:
    scheme: str | None
    authority: str | None
    path: str


def _split(value: str) -> _Location:
    """`scheme://authority/path`, `scheme:/path` or a bare path, without decoding anything."""
    match = _SCHEME.match(value)
    rest = value[match.end() :] if match else value
    authority = None
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        rest = "/" + path
    return _Location(match.group(1).lower() if match else None, authority, rest)


def check_relative(
    value: str, source: str, what: str, *, data: bool, shown: str | None = None
) -> None:
    """The lexical half of the check, for paths that need no storage (table properties):
    `value` must be a relative path that stays below where it is joined, and, for `data`,
    not inside `.hoodie/`. `shown` is the path as the source wrote it, for the message."""
    shown = value if shown is None else shown
    _check_chars(value, source, what)
    if not value:
        raise UnsafePathError(source, shown, f"({what}) is empty")
    if value.startswith("/"):
        raise UnsafePathError(source, shown, f"({what}) is absolute, not in the table")
    if _SCHEME.match(value):
        raise UnsafePathError(source, shown, f"({what}) names another file system")
    parts = value.split("/")
    if ".." in parts:
        raise UnsafePathError(source, shown, f"({what}) leaves the table through '..'")
    if any(part in ("", ".") for part in parts):
        raise UnsafePathError(source, shown, f"({what}) has an empty or '.' component")
    if data and parts[0] == META_FOLDER:
        raise UnsafePathError(
            source, shown, f"({what}) is inside {META_FOLDER}/, where no data file lives"
        )


def _check_chars(value: str, source: str, what: str) -> None:
    if _FORBIDDEN.search(value):
        raise UnsafePathError(source, value, f"({what}) holds a control character or a backslash")


class TablePaths:
    """Resolves the paths one plan, metadata file or marker folder names (`source`, e.g.
    "clean plan 20240101000000000"), refusing with `UnsafePathError` any that leave the table.

    Results are paths relative to the base path, as `Storage` takes them.
    """

    def __init__(self, storage: Storage, source: str) -> None:
        self.storage = storage
        self.source = source
        self._local = isinstance(storage.fs, LocalFileSystem)
        protocol = storage.fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else protocol
        self._schemes = {p.lower() for p in protocols}
        base = _split(storage.base_path)
        if self._local:
            self._schemes.update(_LOCAL_SCHEMES)
            self._authority: str | None = None
            self._root = storage.root.rstrip("/")
            self._real_root: str | None = os.path.realpath(storage.root).rstrip("/")
        else:
            self._authority = base.authority
            self._root = base.path.rstrip("/")
            self._real_root = None
        self._partitions: set[str] = set()
        """Partitions already checked: a plan names each once per file."""
        self._relative_base = (
            storage.base_path if base.scheme is None and not base.path.startswith("/") else None
        )
        """A base path given relative to the working directory: our own plans then hold
        locations relative to the working directory too (`Storage.uri`)."""

    # What services call -------------------------------------------------------------------

    def partition(self, value: str) -> str:
        """A partition path ("" for a non-partitioned table), as plans and write stats name it."""
        if value and value not in self._partitions:
            self._check_relative(value, "partition", data=True)
            self._check_real(value, "partition", data=True)
            self._partitions.add(value)
        return value

    def data_file(self, partition: str, value: str) -> str:
        """A data file of `partition`: a file name, a path relative to the base path, or a full
        location (`file:/…`, `s3://bucket/…`, an absolute path) under the base path.

        Returns its path relative to the base path; refused unless it lies directly in the
        partition's folder, where Hudi keeps every data file.
        """
        partition = self.partition(partition)
        what = f"file of partition {partition!r}"
        self._check_chars(value, what)
        location = _split(value)
        if location.scheme is not None or location.path.startswith("/"):
            relative = self._inside(value, location, what)
        elif "/" in value:
            relative = value
            if (
                posixpath.dirname(value) != partition
                and self._relative_base is not None
                and value.startswith(self._relative_base + "/")
            ):
                relative = value[len(self._relative_base) + 1 :]
        else:
            relative = posixpath.join(partition, value) if partition else value
        self._check_relative(relative, what, data=True, shown=value)
        if posixpath.dirname(relative) != partition:
            raise UnsafePathError(self.source, value, f"is not in its partition {partition!r}")
        self._check_real(relative, what, data=True, shown=value)
        return relative

    def relative(self, value: str, *, data: bool = True) -> str:
        """A path relative to the base path (a write stat's `path`, a marker's data file)."""
        what = "data file" if data else "path"
        self._check_relative(value, what, data=data)
        self._check_real(value, what, data=data)
        return value

    def name(self, value: str, what: str) -> str:
        """One path component that goes into a file name (a file id, a file name)."""
        self._check_chars(value, what)
        if not value or "/" in value or value in (".", ".."):
            raise UnsafePathError(self.source, value, f"is not a plain {what}")
        return value

    # Checks -------------------------------------------------------------------------------

    def _check_chars(self, value: str, what: str) -> None:
        _check_chars(value, self.source, what)

    def _check_relative(
        self, value: str, what: str, *, data: bool, shown: str | None = None
    ) -> None:
        check_relative(value, self.source, what, data=data, shown=shown)

    def _inside(self, value: str, location: _Location, what: str) -> str:
        """The path relative to the base path of a full location, when it is under it."""
        if location.scheme is not None and location.scheme not in self._schemes:
            raise UnsafePathError(
                self.source, value, f"({what}) is on another file system than the table"
            )
        if self._local:
            same_authority = location.authority is None or location.authority in _LOCAL_AUTHORITIES
        else:
            same_authority = location.scheme is not None and location.authority == self._authority
        if not same_authority:
            raise UnsafePathError(
                self.source, value, f"({what}) is on another file system than the table"
            )
        prefix = self._root + "/"
        if not location.path.startswith(prefix):
            raise UnsafePathError(self.source, value, f"({what}) is outside the table")
        return location.path[len(prefix) :]

    def _check_real(
        self, relative: str, what: str, *, data: bool, shown: str | None = None
    ) -> None:
        """On a local file system, the path's existing components must not be symlinks that
        lead out of the table (or into `.hoodie/` for data)."""
        if self._real_root is None:
            return
        real = os.path.realpath(posixpath.join(self.storage.root, relative))
        root = self._real_root
        meta = posixpath.join(root, META_FOLDER)
        outside = real != root and not real.startswith(root + "/")
        into_meta = data and (real == meta or real.startswith(meta + "/"))
        if outside or into_meta:
            raise UnsafePathError(
                self.source,
                relative if shown is None else shown,
                f"({what}) leads {'out of the table' if outside else 'into ' + META_FOLDER + '/'}"
                f" through a symlink (to {real})",
            )
