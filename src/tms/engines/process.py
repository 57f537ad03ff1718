"""A job run as a local process group: started detached, polled, killed as a whole.

Each job gets its own session (process group), so `kill()` takes the spark-submit JVM, the
Python driver it starts and that driver's Python workers together, and a job survives a
restart of the service that launched it (its lease decides its fate, not our lifetime).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tms.engines.base import LaunchError

__all__ = ["ProcessHandle", "start_process", "tail_log"]

_KILL_WAIT_SECONDS = 10.0


class ProcessHandle:
    """`JobHandle` of a process group led by a process we started."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self._process = process
        self._log_path = log_path

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def log_path(self) -> Path:
        return self._log_path

    def poll(self) -> int | None:
        return self._process.poll()

    def kill(self) -> None:
        """SIGKILL the whole group (the leader may be gone while its children live on)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=_KILL_WAIT_SECONDS)


def start_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    header: str = "",
) -> ProcessHandle:
    """Start `argv` in a new session, stdout and stderr appended to `log_path`."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            if header:
                log.write(header.encode())
                log.flush()
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=log_path.parent,
                start_new_session=True,
            )
    except OSError as exc:
        raise LaunchError(f"cannot start {argv[0]}: {exc}") from exc
    return ProcessHandle(process, log_path)


def tail_log(path: Path | None, *, lines: int = 30, max_bytes: int = 16384) -> str:
    """The last lines of a job log, for the attempt's error text ('' when unreadable)."""
    if path is None:
        return ""
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - max_bytes))
            data = file.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if len(data) == max_bytes:
        text = text.partition("\n")[2]  # drop the cut first line
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
