"""Where a test table keeps its instant files, whatever its timeline layout."""

from __future__ import annotations

from pathlib import Path

from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.layout import TimelineLayout


def timeline_dir(base: str) -> Path:
    """`.hoodie` (layout 1) or `.hoodie/timeline` (layout 2)."""
    return Path(base, TimelineLayout.of(TableConfig.load(Storage(base))).folder)


def instant_files(base: str, requested_time: str) -> set[str]:
    """Names of the instant files of one instant, in every state."""
    return {p.name for p in timeline_dir(base).glob(f"{requested_time}[._]*")}


def completed_rollback_files(base: str, requested: str, completion: str | None) -> set[str]:
    """The files a completed rollback leaves, as Hudi names them in the table's layout."""
    done = f"{requested}_{completion}.rollback" if completion else f"{requested}.rollback"
    return {f"{requested}.rollback.requested", f"{requested}.rollback.inflight", done}
