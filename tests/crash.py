"""Killing a `tms` command at a chosen moment, as a crash would."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

TMS = [sys.executable, "-m", "tms"]


def run_tms(args: Sequence[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `tms ARGS` to completion, capturing its output."""
    return subprocess.run(
        [*TMS, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def kill_tms_when(args: Sequence[str], condition: Callable[[], bool], timeout: float = 300) -> None:
    """Start `tms ARGS`, SIGKILL its whole process group (driver JVM, Python workers) as soon
    as `condition()` holds. Fails if the command ends first or the condition never holds.
    Spark's scratch directories (which a killed driver cannot remove) go to a temporary
    directory that is removed afterwards."""
    scratch = tempfile.mkdtemp(prefix="tms-killed-spark-")
    proc = subprocess.Popen(
        [*TMS, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        env={**os.environ, "SPARK_LOCAL_DIRS": scratch},
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if condition():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                return
            if proc.poll() is not None:
                stderr = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"tms {' '.join(args)} ended before the kill: {stderr}")
            time.sleep(0.01)
        raise AssertionError(f"condition never held while tms {' '.join(args)} ran")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


def has_markers(base_path: str | Path, instant_time: str | None = None) -> Callable[[], bool]:
    """A condition: the instant (any, when None) has written at least one marker."""
    temp = Path(base_path) / ".hoodie" / ".temp"

    def check() -> bool:
        roots = [temp / instant_time] if instant_time else list(temp.glob("*"))
        return any(p.is_file() for root in roots for p in root.rglob("*.marker.*"))

    return check
