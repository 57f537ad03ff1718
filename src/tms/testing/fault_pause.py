"""Holding a job at a named step, so that fault tests reach that step deterministically.

With `TMS_FAULT_PAUSE_AT=<step>` and `TMS_FAULT_PAUSE_DIR=<dir>` in a job's environment,
the job, on reaching that step, writes `<dir>/<step>.<pid>` and waits until `<dir>/go`
exists; a test meanwhile kills it, cancels it or cuts it off at exactly that step. Without
them, as in production, a step costs one environment lookup.

Steps, each where a crash loses the most:
- every stage the work enters (`tms.services.progress`): `planning`; `starting Spark` (the
  plan is on the table and claimed; the SparkSession that runs it is about to start); a
  service's task stage (`compacting`, `clustering`…: its tasks are about to start);
  `committing` (the tasks are done, the metadata table's delta commit is not written);
  `syncing metadata` (the same, under the table lock);
- `tasks writing`: in a Spark task, once it has written its file group's files;
- `metadata committed`: the metadata table's delta commit is complete, the data table's
  instant is not;
- `committed`: the data table's instant is complete, the service has not been told;
- the metadata table's clean after its compaction, in the same job, has steps of its own:
  `metadata table cleaning` (its plan is inflight, no file deleted), `metadata table tasks
  writing` (a task deleted its files), `metadata table committing`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["PAUSE_AT", "PAUSE_DIR", "hold", "pause_point"]

log = logging.getLogger(__name__)

PAUSE_AT = "TMS_FAULT_PAUSE_AT"
PAUSE_DIR = "TMS_FAULT_PAUSE_DIR"
_POLL_SECONDS = 0.05


def pause_point(step: str) -> None:
    """Wait at `step` when the environment asks for it (see the module doc)."""
    if os.environ.get(PAUSE_AT) != step or not os.environ.get(PAUSE_DIR):
        return
    directory = Path(os.environ[PAUSE_DIR])
    go = directory / "go"
    if go.exists():
        return
    log.warning("paused at %s until %s exists", step, go)
    hold(directory / f"{step}.{os.getpid()}", go)


def hold(announce: Path, release: Path) -> None:
    """Write `announce` (this process's id), then wait until `release` exists: how every
    test hold tells the test where it is and lets it go on."""
    announce.write_text(str(os.getpid()))
    while not release.exists():
        time.sleep(_POLL_SECONDS)
