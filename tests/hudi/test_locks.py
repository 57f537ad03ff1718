"""The table lock of Hudi's file-system lock provider: one holder at a time, an expired lock
taken over, and a timeout that names the holder."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tms.hudi.locks import FileSystemLock, LockTimeoutError
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


def test_the_lock_folder_is_hudis_setting(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    with FileSystemLock(storage, folder=".hoodie/.aux"):
        assert (tmp_path / ".hoodie" / ".aux" / "lock").exists()
