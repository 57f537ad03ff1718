"""The table lock of Hudi's `FileSystemBasedLockProvider`: a file `lock` in the lock folder
(`hoodie.write.lock.filesystem.path`, by default `<base>/.hoodie`), created only if absent.

Whoever creates the file holds the lock until it deletes it. Creating is atomic where the
filesystem creates atomically: a hard link on disk, a conditional PUT (`If-None-Match: *`) on
S3, GCS and Azure (`Storage.create_new`). A lock older than the expiry
(`hoodie.write.lock.filesystem.expire`, minutes; 0, Hudi's default, never expires) is taken
to belong to a dead holder and deleted, as Hudi's provider does. The file holds a JSON note of
who took it (Hudi writes `lockCreateTime`, `lockThreadName` and `lockStacksInfo`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from tms.hudi.errors import HudiError, UnsupportedTableError
from tms.hudi.storage import Storage

__all__ = [
    "DEFAULT_LOCK_FOLDER",
    "FILESYSTEM_PROVIDER",
    "POSTGRES_PROVIDER",
    "FileSystemLock",
    "LockSpec",
    "LockTimeoutError",
]

log = logging.getLogger(__name__)

DEFAULT_LOCK_FOLDER = ".hoodie"
LOCK_FILE_NAME = "lock"


class LockTimeoutError(HudiError):
    """The table lock could not be taken in time: another writer holds it."""


class FileSystemLock:
    """Hudi's file-system table lock, as a context manager.

    `wait_seconds` bounds how long `acquire` tries (Hudi's `lock.wait_time_ms`); it retries
    every `retry_seconds`. Not re-entrant: one holder takes it once.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        folder: str = DEFAULT_LOCK_FOLDER,
        expire_minutes: float = 0,
        wait_seconds: float = 60.0,
        retry_seconds: float = 0.5,
        owner: str = "tms",
    ) -> None:
        self.storage = storage
        self.path = f"{folder.rstrip('/')}/{LOCK_FILE_NAME}"
        self.expire_minutes = expire_minutes
        self.wait_seconds = wait_seconds
        self.retry_seconds = retry_seconds
        self.owner = owner
        self._held = False

    def __repr__(self) -> str:
        return f"FileSystemLock({self.storage.uri(self.path)!r})"

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it (an expired lock is deleted first)."""
        if self._held:
            raise RuntimeError(f"{self!r} is already held by this holder")
        try:
            self.storage.create_new(self.path, self._note())
        except FileExistsError:
            if not self._expired():
                return False
            log.warning("deleting the expired table lock %s", self.storage.uri(self.path))
            self.storage.delete(self.path)
            try:
                self.storage.create_new(self.path, self._note())
            except FileExistsError:
                return False
        self._held = True
        return True

    def acquire(self) -> None:
        """Take the lock, waiting up to `wait_seconds`; `LockTimeoutError` naming the holder."""
        deadline = time.monotonic() + self.wait_seconds
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"the table lock {self.storage.uri(self.path)} is held by another writer "
                    f"({self._holder()}); not taken within {self.wait_seconds:g}s"
                )
            time.sleep(self.retry_seconds)

    def release(self) -> None:
        if self._held:
            self._held = False
            self.storage.delete(self.path)

    def __enter__(self) -> FileSystemLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _expired(self) -> bool:
        if self.expire_minutes <= 0:
            return False
        try:
            modified = self.storage.modified(self.path)
        except FileNotFoundError:
            return True  # released meanwhile: try again at once
        return time.time() - modified > self.expire_minutes * 60

    def _holder(self) -> str:
        try:
            note = json.loads(self.storage.read_bytes(self.path) or b"{}")
        except (FileNotFoundError, ValueError):
            return "holder unknown"
        if not isinstance(note, dict):
            return "holder unknown"
        return ", ".join(
            f"{k} {note[k]}" for k in ("lockThreadName", "lockCreateTime") if k in note
        )

    def _note(self) -> bytes:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        thread = threading.current_thread().name
        holder = f"{self.owner}@{socket.gethostname()}:{os.getpid()}:{thread}"
        note = {"lockCreateTime": now, "lockThreadName": holder, "lockStacksInfo": []}
        return json.dumps(note).encode()


FILESYSTEM_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
POSTGRES_PROVIDER = "postgres"
PROVIDER_ALIASES = {
    "filesystem": FILESYSTEM_PROVIDER,
    "FileSystemBasedLockProvider": FILESYSTEM_PROVIDER,
    FILESYSTEM_PROVIDER: FILESYSTEM_PROVIDER,
    POSTGRES_PROVIDER: POSTGRES_PROVIDER,
}
REFUSED_PROVIDERS = {
    "ZookeeperBasedLockProvider": "ZooKeeper",
    "HiveMetastoreBasedLockProvider": "the Hive metastore",
    "DynamoDBBasedLockProvider": "DynamoDB",
    "InProcessLockProvider": "a lock inside the writer's own process",
    "StorageBasedLockProvider": "storage conditional writes (Hudi 1.1's lock file protocol)",
}
"""Lock providers Hudi writers use that `tms` cannot take part in, by class name."""


@dataclass(frozen=True)
class LockSpec:
    """How a table's writers lock it, as `tms` must too (`hoodie.write.lock.*`).

    `FileSystemBasedLockProvider` (the default): the lock file in `folder`, with its expiry.
    `postgres`: for tables only `tms` services; no lock file, since PostgreSQL already lets
    one operation of a table run at a time (a unique index on running operations, and the
    attempt's lease, which its heartbeats keep). Any other provider is refused: a lock
    `tms` does not take would let it schedule or commit under a writer's feet.
    """

    provider: str = FILESYSTEM_PROVIDER
    folder: str = DEFAULT_LOCK_FOLDER
    expire_minutes: float = 0
    wait_seconds: float = 60.0

    @classmethod
    def of(
        cls,
        provider: str | None = None,
        folder: str | None = None,
        expire_minutes: float | None = None,
        wait_seconds: float | None = None,
    ) -> LockSpec:
        """The spec for Hudi's settings; `UnsupportedTableError` for a provider `tms` cannot
        take part in, naming it."""
        name = (provider or FILESYSTEM_PROVIDER).strip()
        known = PROVIDER_ALIASES.get(name) or PROVIDER_ALIASES.get(name.rsplit(".", 1)[-1])
        if known is None:
            short = name.rsplit(".", 1)[-1]
            what = REFUSED_PROVIDERS.get(short)
            reason = f"locks through {what}, which tms cannot take" if what else "is not known"
            raise UnsupportedTableError(
                f"lock provider {name} {reason}; tms takes part in "
                f"{FILESYSTEM_PROVIDER} (the lock file .hoodie/lock) and '{POSTGRES_PROVIDER}' "
                "(tables only tms services): set hoodie.write.lock.provider on the table"
            )
        return cls(
            provider=known,
            folder=(folder or DEFAULT_LOCK_FOLDER).strip().strip("/") or DEFAULT_LOCK_FOLDER,
            expire_minutes=expire_minutes if expire_minutes is not None else 0,
            wait_seconds=wait_seconds if wait_seconds is not None else 60.0,
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> LockSpec:
        """The spec for parsed `hoodie.write.lock.*` settings (`provider`, `folder`,
        `expire_minutes`, `wait_ms`; `tms.services.params.lock_settings` parses them)."""
        wait_ms = settings.get("wait_ms")
        return cls.of(
            settings.get("provider"),
            settings.get("folder"),
            settings.get("expire_minutes"),
            wait_ms / 1000 if wait_ms is not None else None,
        )

    def file_lock(self, storage: Storage) -> FileSystemLock | None:
        """The lock file to take, or None where PostgreSQL excludes (`postgres`)."""
        if self.provider != FILESYSTEM_PROVIDER:
            return None
        return FileSystemLock(
            storage,
            folder=self.folder,
            expire_minutes=self.expire_minutes,
            wait_seconds=self.wait_seconds,
        )
