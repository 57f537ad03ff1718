"""The table lock of Hudi's file-system lock provider: one holder at a time, an expired lock
taken over, and a timeout that names the holder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import FILESYSTEM_PROVIDER, FileSystemLock, LockSpec, LockTimeoutError
from tms.hudi.storage import Storage


def test_one_holder_at_a_time(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    first = FileSystemLock(storage, owner="first")
    second = FileSystemLock(storage, owner="second", wait_seconds=0.2, retry_seconds=0.05)
    with first:
        note = json.loads((tmp_path / ".hoodie" / "lock").read_text())
        assert note["lockThreadName"].startswith("first@")
        assert not second.try_acquire()
        with pytest.raises(LockTimeoutError, match=r"held by another writer .*first@"):
            second.acquire()
    assert not (tmp_path / ".hoodie" / "lock").exists()
    with second:
        assert not first.try_acquire()


def test_a_lock_past_its_expiry_is_taken_over(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    dead = FileSystemLock(storage, owner="dead")
    assert dead.try_acquire()
    never = FileSystemLock(storage, owner="other")
    assert not never.try_acquire(), "Hudi's default: a lock never expires"
    old = time.time() - 120
    os.utime(tmp_path / ".hoodie" / "lock", (old, old))
    expiring = FileSystemLock(storage, owner="other", expire_minutes=1)
    assert expiring.try_acquire()
    note = json.loads((tmp_path / ".hoodie" / "lock").read_text())
    assert note["lockThreadName"].startswith("other@")


def test_a_lock_left_by_a_killed_tms_process_of_this_host_is_taken_over(tmp_path: Path) -> None:
    """Killed while it held the lock (an OOM kill mid-commit), a job never releases it, and
    with Hudi's default expiry (never) the table would stay locked for good."""
    storage = Storage(str(tmp_path))
    lock = tmp_path / ".hoodie" / "lock"
    dead_pid = _pid_of_ended_process()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        host = socket.gethostname()
        for holder, taken in [
            (f"tms@{host}:{dead_pid}:tms-job-work", True),
            (f"tms@{host}:{alive.pid}:tms-job-work", False),
            (f"tms@another-host:{dead_pid}:tms-job-work", False),  # cannot tell: it may run
            ("Thread-12", False),  # a Hudi writer's lock
        ]:
            lock.parent.mkdir(exist_ok=True)
            lock.write_text(json.dumps({"lockThreadName": holder, "lockCreateTime": "x"}))
            assert FileSystemLock(storage).try_acquire() is taken, holder
            lock.unlink()
    finally:
        alive.kill()
        alive.wait()


def _pid_of_ended_process() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_lock_folder_is_hudis_setting(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    with FileSystemLock(storage, folder=".hoodie/.aux"):
        assert (tmp_path / ".hoodie" / ".aux" / "lock").exists()


@pytest.mark.parametrize(
    ("provider", "says"),
    [
        ("org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider", "ZooKeeper"),
        ("org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider", "Hive metastore"),
        ("org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider", "DynamoDB"),
        ("org.apache.hudi.client.transaction.lock.InProcessLockProvider", "own process"),
        ("com.example.MyLockProvider", "is not known"),
    ],
)
def test_lock_providers_tms_cannot_take_are_refused_by_name(provider: str, says: str) -> None:
    with pytest.raises(UnsupportedTableError, match=says) as refused:
        LockSpec.of(provider)
    assert provider in str(refused.value) and "hoodie.write.lock.provider" in str(refused.value)


def test_the_file_system_provider_and_postgres(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    default = LockSpec.of(None)
    assert default == LockSpec.of("FileSystemBasedLockProvider") == LockSpec.of(FILESYSTEM_PROVIDER)
    lock = LockSpec.of(FILESYSTEM_PROVIDER, ".hoodie/.aux/", 5, 2.0).file_lock(storage)
    assert lock is not None and lock.path == ".hoodie/.aux/lock"
    assert (lock.expire_minutes, lock.wait_seconds) == (5, 2.0)
    assert LockSpec.of("postgres").file_lock(storage) is None, "PostgreSQL excludes"
