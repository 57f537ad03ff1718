"""Holding a job at a named step, so that fault tests reach that step deterministically.

With `TMS_FAULT_PAUSE_AT=<step>` and `TMS_FAULT_PAUSE_DIR=<dir>` in a job's environment,
the job, on reaching that step, writes `<dir>/<step>.<pid>` and waits until `<dir>/go`
exists; a test meanwhile kills it, cancels it or cuts it off at exactly that step. Without
them, as in production, a step costs one environment lookup.

Steps: `starting Spark` (the plan is on the table and claimed; the SparkSession that runs
it is about to start).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["PAUSE_AT", "PAUSE_DIR", "pause_point"]

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
    (directory / f"{step}.{os.getpid()}").write_text(str(os.getpid()))
    log.warning("paused at %s until %s exists", step, go)
    while not go.exists():
        time.sleep(_POLL_SECONDS)
