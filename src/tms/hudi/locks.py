"""The table lock of Hudi's `FileSystemBasedLockProvider`: a file `lock` in the lock folder
(`hoodie.write.lock.filesystem.path`, by default `<base>/.hoodie`), created only if absent.

Whoever creates the file holds the lock until it deletes it. Creating is atomic where the
filesystem creates atomically: a hard link on disk, a conditional PUT (`If-None-Match: *`) on
S3, GCS and Azure (`Storage.create_new`). A lock older than the expiry
(`hoodie.write.lock.filesystem.expire`, minutes; 0, Hudi's default, never expires) is taken
to belong to a dead holder and deleted, as Hudi's provider does. The file holds a JSON note of
who took it (Hudi writes `lockCreateTime`, `lockThreadName` and `lockStacksInfo`); `tms` names
itself `tms@<host>:<pid>:<thread>`, so a lock a `tms` process of this host left when it was
killed is deleted too, once that process no longer runs, rather than holding the table until
the expiry (never, by default).

Tables only `tms` services may lock with `postgres` instead: a PostgreSQL advisory lock named
by the table's base path, which the service takes on its database and a job asks the service
for (`use_advisory_locks` says how, in this context). Both only try the lock; waiting for it,
and the timeout, are this module's, as for the lock file. `LockSpec.hold` takes either.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, Protocol

from tms.base_path import BasePathError, normalize_base_path
from tms.hudi.errors import LockTimeoutError, UnsupportedTableError
from tms.hudi.storage import Storage

__all__ = [
    "DEFAULT_LOCK_FOLDER",
    "FILESYSTEM_PROVIDER",
    "POSTGRES_PROVIDER",
    "AdvisoryLocks",
    "FileSystemLock",
    "LockSpec",
    "LockTimeoutError",
    "advisory_key",
    "hold_advisory",
    "use_advisory_locks",
]

log = logging.getLogger(__name__)

DEFAULT_LOCK_FOLDER = ".hoodie"
LOCK_FILE_NAME = "lock"


def take_within(
    try_take: Callable[[], bool],
    wait_seconds: float,
    retry_seconds: float,
    held_by: Callable[[], str],
) -> None:
    """Call `try_take` every `retry_seconds` until it takes the lock; after `wait_seconds`,
    `LockTimeoutError` saying who holds it (`held_by`)."""
    deadline = time.monotonic() + wait_seconds
    while not try_take():
        if time.monotonic() >= deadline:
            raise LockTimeoutError(f"{held_by()}; not taken within {wait_seconds:g}s")
        time.sleep(retry_seconds)


def advisory_lock_busy(key: int) -> str:
    return f"the table's PostgreSQL advisory lock {key} is held by another tms service"


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
            stale = self._stale()
            if stale is None:
                return False
            log.warning("deleting the table lock %s: %s", self.storage.uri(self.path), stale)
            self.storage.delete(self.path)
            try:
                self.storage.create_new(self.path, self._note())
            except FileExistsError:
                return False
        self._held = True
        return True

    def acquire(self) -> None:
        """Take the lock, waiting up to `wait_seconds`; `LockTimeoutError` naming the holder."""
        take_within(
            self.try_acquire,
            self.wait_seconds,
            self.retry_seconds,
            lambda: (
                f"the table lock {self.storage.uri(self.path)} is held by another writer "
                f"({self._holder()})"
            ),
        )

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

    def _stale(self) -> str | None:
        """Why the lock file left by someone else belongs to a dead holder (None: it may
        not). It expired; or a `tms` process of this host took it and no longer runs (killed
        while it held the lock: it never expires with Hudi's default expiry)."""
        try:
            modified = self.storage.modified(self.path)
        except FileNotFoundError:
            return "released meanwhile"  # try again at once
        if self.expire_minutes > 0 and time.time() - modified > self.expire_minutes * 60:
            return f"older than its expiry ({self.expire_minutes:g} minutes)"
        pid = self._local_holder_pid()
        if pid is not None and not _process_runs(pid):
            return f"its holder, process {pid} of this host, no longer runs"
        return None

    def _local_holder_pid(self) -> int | None:
        """The process id of the holder when a `tms` process of this host took the lock."""
        holder = str(self._note_of_holder().get("lockThreadName", ""))
        owner, _, rest = holder.partition("@")
        host, _, rest = rest.partition(":")
        pid, _, _thread = rest.partition(":")
        if owner != self.owner or host != socket.gethostname() or not pid.isdigit():
            return None
        return int(pid)

    def _note_of_holder(self) -> dict[str, object]:
        try:
            note = json.loads(self.storage.read_bytes(self.path) or b"{}")
        except (FileNotFoundError, ValueError):
            return {}
        return note if isinstance(note, dict) else {}

    def _holder(self) -> str:
        note = self._note_of_holder()
        if not note:
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


def _process_runs(pid: int) -> bool:
    """Whether process `pid` of this host runs (a zombie no one reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


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
    `postgres`: for tables only `tms` services; a PostgreSQL advisory lock named by the
    table's base path, no lock file (`hold` takes it). Any other
    provider is refused: a lock `tms` does not take would let it schedule or commit under a
    writer's feet.
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
        `expire_minutes`, `wait_ms`; `tms.planning.lock_settings` parses them)."""
        wait_ms = settings.get("wait_ms")
        return cls.of(
            settings.get("provider"),
            settings.get("folder"),
            settings.get("expire_minutes"),
            wait_ms / 1000 if wait_ms is not None else None,
        )

    @contextmanager
    def hold(self, storage: Storage) -> Iterator[None]:
        """Hold the table's lock for the `with` block: the lock file, or the PostgreSQL
        advisory lock through what this context was given (`use_advisory_locks`).
        Re-entrant within a thread: a holder that locks again (a clean's own cancels inside
        its scheduling) goes on without waiting for itself."""
        held: set[str] = _held.__dict__.setdefault("names", set())
        lock: AbstractContextManager[object]
        if self.provider == POSTGRES_PROVIDER:
            advisory = _advisory.get()
            if advisory is None:
                raise UnsupportedTableError(
                    f"the table at {storage.base_path} is locked with '{POSTGRES_PROVIDER}', a "
                    "PostgreSQL advisory lock taken through the tms service; this process has "
                    "no way to take it (run the service through tms)"
                )
            key = advisory_key(storage.base_path)
            name = f"postgres:{key}"
            lock = hold_advisory(advisory, key, self.wait_seconds)
        else:
            file_lock = self.file_lock(storage)
            assert file_lock is not None
            name = storage.uri(file_lock.path)
            lock = file_lock
        if name in held:
            yield
            return
        with lock:
            held.add(name)
            try:
                yield
            finally:
                held.discard(name)

    def file_lock(self, storage: Storage) -> FileSystemLock | None:
        """The lock file to take, or None for `postgres` (an advisory lock, no file)."""
        if self.provider != FILESYSTEM_PROVIDER:
            return None
        return FileSystemLock(
            storage,
            folder=self.folder,
            expire_minutes=self.expire_minutes,
            wait_seconds=self.wait_seconds,
        )


class AdvisoryLocks(Protocol):
    """Takes PostgreSQL advisory locks for this process or job, without waiting: the service
    on its own database connections, a job (no database access) through the service's job
    API. `hold_advisory` waits for one, trying every `retry_seconds`."""

    @property
    def retry_seconds(self) -> float: ...

    def try_take(self, key: int) -> bool:
        """Take the lock `key` now: True when this process or job holds it."""
        ...

    def release(self, key: int) -> None:
        """Release the lock `key` this process or job took."""
        ...


@contextmanager
def hold_advisory(locks: AdvisoryLocks, key: int, wait_seconds: float) -> Iterator[None]:
    """Hold the advisory lock `key` through `locks` for the `with` block; `LockTimeoutError`
    when another holder keeps it past `wait_seconds`."""
    take_within(
        partial(locks.try_take, key),
        wait_seconds,
        locks.retry_seconds,
        partial(advisory_lock_busy, key),
    )
    try:
        yield
    finally:
        locks.release(key)


_advisory: ContextVar[AdvisoryLocks | None] = ContextVar("tms_advisory_locks", default=None)
_held = threading.local()
"""Per thread, the names of the table locks it holds."""


def advisory_key(base_path: str) -> int:
    """The advisory lock's key for a table: a signed 64-bit digest of its base path in the
    one spelling the service stores (so the service and its jobs name the same lock)."""
    try:
        path = normalize_base_path(base_path)
    except BasePathError:
        path = base_path.rstrip("/")
    digest = hashlib.blake2b(f"tms-table-lock:{path}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def use_advisory_locks(locks: AdvisoryLocks) -> Iterator[None]:
    """Take `postgres` table locks through `locks` in this context (a thread's work)."""
    token = _advisory.set(locks)
    try:
        yield
    finally:
        _advisory.reset(token)
