"""What `tms run` shows while it works, and where the rest goes.

The service reports its stages and file groups through `tms.services.progress`, as it does
in a job, where the heartbeats carry them; here a `StagePrinter` prints each change of
them with the time since the command started. What Spark prints (log4j's warnings, the
JVM's own lines) and what the libraries log go to a log file the command names
(`RunLog`), so the terminal shows the command's own lines and tms's warnings only.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from io import TextIOWrapper
from pathlib import Path
from types import TracebackType

from tms.services.progress import Progress, ProgressSnapshot, tracking

__all__ = ["RunLog", "StagePrinter", "default_log_file"]

Echo = Callable[[str], None]
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOB_OUTCOME_LOGGER = "tms.jobs.runner"


def default_log_file(service: str, now: datetime | None = None) -> Path:
    """`.tms/logs/run/<service>-<UTC time>.log`: under the working directory's `.tms`, where
    tms keeps its state and logs by default."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(".tms") / "logs" / "run" / f"{service}-{stamp}.log"


class _TmsWarnings(logging.Filter):
    """Lets through tms's own warnings and errors only: the terminal's share of the log.
    The job's account of its own failure (`tms.jobs.runner`, with its traceback) stays in
    the log file: the command prints the outcome the job reports."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == JOB_OUTCOME_LOGGER:
            return False
        return record.name == "tms" or record.name.startswith("tms.")


class _FileOnFirstRecord(logging.FileHandler):
    """Appends to its file, created (with its folder) at the first record only."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)

    def _open(self) -> TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


class RunLog:
    """While inside: every logger's records (INFO and up) and Python's warnings go to
    `path`, created at the first record (a run refused at once leaves none); tms's warnings
    also go to stderr. The root logger is restored on exit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handlers: list[logging.Handler] = []
        self._saved_level = logging.NOTSET

    def __enter__(self) -> RunLog:
        to_file = _FileOnFirstRecord(self.path)
        to_file.setLevel(logging.INFO)
        to_file.setFormatter(logging.Formatter(FORMAT))
        to_terminal = logging.StreamHandler(sys.stderr)
        to_terminal.setLevel(logging.WARNING)
        to_terminal.addFilter(_TmsWarnings())
        to_terminal.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        self._saved_level = root.level
        self._handlers = [to_file, to_terminal]
        for handler in self._handlers:
            root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.captureWarnings(True)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.captureWarnings(False)
        root = logging.getLogger()
        for handler in self._handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(self._saved_level)


class StagePrinter:
    """Prints each change of the work's stage and file groups once, as
    `[  12.3s] compaction: compacting, 2/4 file groups`: a new stage or Spark job at once
    (in the work's thread, before the work goes on), the file groups done while a Spark job
    runs every `interval` seconds (read from Spark's status tracker). `notes` add a few
    words to a stage's line."""

    def __init__(
        self,
        service: str,
        echo: Echo,
        started: float,
        *,
        notes: Mapping[str, str] | None = None,
        interval: float = 1.0,
    ) -> None:
        self.service = service
        self.echo = echo
        self.started = started
        self.notes = dict(notes or {})
        self.interval = interval
        self.progress = Progress()
        self._lock = threading.Lock()
        self._shown: ProgressSnapshot | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="tms-run-progress", daemon=True)
        self._tracking = tracking(self.progress)

    def __enter__(self) -> StagePrinter:
        self.progress.listen(self.show)
        self._tracking.__enter__()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.progress.unlisten(self.show)
        self._tracking.__exit__(kind, exc, tb)
        self.show()  # where the work ended, when the last poll did not see it

    def show(self) -> None:
        """Print the progress now, when it changed since the last line."""
        with self._lock:
            now = self.progress.now()
            if now is None or now == self._shown:
                return
            new_stage = self._shown is None or self._shown.stage != now.stage
            self._shown = now
            line = f"{self.service}: {now.describe()}"
            note = self.notes.get(now.stage) if new_stage else None
            if note:
                line += f" ({note})"
            self.echo(f"[{time.monotonic() - self.started:6.1f}s] {line}")

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.show()
