"""The processes a killed postmaster leaves behind.

A postmaster killed with SIGKILL cannot stop its children. A backend notices its
postmaster's death only when it waits (for a client, a lock, a latch); one busy in a long
query, or stopped, lives on, attached to the server's shared memory segment, and
PostgreSQL refuses to start on the directory while that segment is attached ("pre-existing
shared memory block ... is still in use"). Before a restart these orphans are ended.

A process is an orphan of the server under `pgdata` when it is a `postgres` process whose
working directory is `pgdata` (every server process changes into its data directory, so
another directory's server is never chosen), that is a child of a postmaster (its title
reads `postgres: ...`, a postmaster keeps its command line), and whose parent is no longer
a process of that directory (it was reparented when its postmaster died). A postmaster
starting meanwhile and its children are not orphans.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

__all__ = ["QUIT_SECONDS", "end_orphans", "find_orphans"]

log = logging.getLogger(__name__)

QUIT_SECONDS = 2.0
"""How long an orphan has to quit on SIGQUIT before it is killed (SIGKILL)."""
GONE_SECONDS = 10.0
"""How long to wait, after SIGKILL, for the processes to exit and the segment to be free."""
_POLL_SECONDS = 0.05
_SHM_TABLE = Path("/proc/sysvipc/shm")


def find_orphans(pgdata: Path) -> list[psutil.Process]:
    """The live processes of the server under `pgdata` whose postmaster is gone."""
    directory = pgdata.resolve()
    members: dict[int, psutil.Process] = {}
    for process in psutil.process_iter():
        try:
            if process.name() == "postgres" and Path(process.cwd()) == directory:
                members[process.pid] = process
        except psutil.Error:  # gone, a zombie, or another user's (never the server's)
            continue
    orphans = []
    for process in members.values():
        try:
            title = process.cmdline()
            if title and title[0].startswith("postgres:") and process.ppid() not in members:
                orphans.append(process)
        except psutil.Error:
            continue
    return orphans


def end_orphans(pgdata: Path, segment: int | None) -> list[int]:
    """End the orphans of the server under `pgdata`: SIGQUIT (PostgreSQL's immediate
    shutdown of a backend), then SIGKILL for those still there after `QUIT_SECONDS`; then
    wait until they are gone and the shared memory segment `segment` (its id, as
    `postmaster.pid` records it) has no process attached. Returns their pids."""
    orphans = find_orphans(pgdata)
    if not orphans:
        return []
    log.warning(
        "ending %d orphaned process(es) of the dead server under %s: %s",
        len(orphans),
        pgdata,
        ", ".join(_describe(p) for p in orphans),
    )
    _signal(orphans, signal.SIGQUIT)
    if not _wait(lambda: not _alive(orphans), QUIT_SECONDS):
        left = _alive(orphans)
        log.warning("killing %s, which did not quit", ", ".join(_describe(p) for p in left))
        _signal(left, signal.SIGKILL)
        if not _wait(lambda: not _alive(orphans), GONE_SECONDS):
            log.error("%s still running after SIGKILL", [p.pid for p in _alive(orphans)])
    if segment is not None and not _wait(lambda: not _attached(segment), GONE_SECONDS):
        log.error("shared memory segment %d under %s is still attached", segment, pgdata)
    return [p.pid for p in orphans]


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} ({process.cmdline()[0].strip()})"
    except (psutil.Error, IndexError):
        return str(process.pid)


def _signal(processes: list[psutil.Process], signum: signal.Signals) -> None:
    for process in processes:
        # psutil signals the process found, not another that reused its pid since.
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signum)


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running; a zombie has exited (and detached its memory) already."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def _attached(segment: int) -> bool:
    """True while processes are attached to the System V shared memory segment `segment`
    (Linux's table of segments; elsewhere the processes' exit is all we wait for)."""
    try:
        lines = _SHM_TABLE.read_text().splitlines()
    except OSError:
        return False
    header = lines[0].split() if lines else []
    if "shmid" not in header or "nattch" not in header:
        return False
    id_at, nattch_at = header.index("shmid"), header.index("nattch")
    for line in lines[1:]:
        fields = line.split()
        if len(fields) > max(id_at, nattch_at) and fields[id_at] == str(segment):
            return fields[nattch_at] != "0"
    return False


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_SECONDS)
    return True
