"""The demo's logging: its output is the demo's own lines and tms's warnings; everything the
libraries it runs log (moto's S3 server's access log, uvicorn, botocore, …) goes to a log
file in the demo's service folder, which the demo names at the start.

A library left to itself would print to the terminal: werkzeug, under moto's server, adds
a handler of its own to stderr for one line per request unless a handler already takes its
records, which the file handler here does.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["demo_logging"]

FORMAT = "%(levelname)s %(name)s: %(message)s"
QUIET = {"tms.api.app": logging.ERROR}
"""tms loggers whose warnings the demo does not show ("auth off" is what a local demo wants)."""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _PlainText(logging.Formatter):
    """Drops terminal colours (werkzeug colours its access log's non-2xx lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return _ANSI.sub("", super().format(record))


class _OwnWarnings(logging.Filter):
    """Lets through tms's warnings and errors only."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "tms" and not record.name.startswith("tms."):
            return False
        return record.levelno >= QUIET.get(record.name, logging.WARNING)


@contextmanager
def demo_logging(log_file: Path) -> Iterator[None]:
    """While inside: tms's warnings on stderr, every library's log (INFO and up, tms's too)
    in `log_file`; the root logger's handlers and level are restored on exit."""
    root = logging.getLogger()
    saved_level = root.level
    log_file.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setLevel(logging.INFO)
    to_file.setFormatter(_PlainText(f"%(asctime)s {FORMAT}"))
    to_terminal = logging.StreamHandler(sys.stderr)
    to_terminal.setLevel(logging.WARNING)
    to_terminal.addFilter(_OwnWarnings())
    to_terminal.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(to_file)
    root.addHandler(to_terminal)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(to_terminal)
        root.removeHandler(to_file)
        root.setLevel(saved_level)
        to_file.close()
