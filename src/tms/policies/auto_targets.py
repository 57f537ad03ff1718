"""The targets of an `auto` trigger: what the operator wants of a table, not when to act.

Every target is optional (its default below); 0 turns the decision it drives off, as 0
turns a threshold off. The same object is accepted under every action `auto` serves, so
one set of targets may be repeated for compaction, log compaction, clustering and clean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tms.policies.strategy import Path, SpecError, parse_number

__all__ = ["DEFAULTS", "Targets", "parse_targets"]


@dataclass(frozen=True)
class Targets:
    """An `auto` trigger's targets (see the README, "The auto trigger")."""

    max_log_files_per_slice: int = 6
    """Log files a snapshot read merges per file slice, at p95 (compaction's target)."""
    log_compaction_max_ratio: float = 0.1
    """Log compaction instead of compaction while the log bytes of a slice (p95) are at
    most this share of the median base file (0 = never log compaction)."""
    max_small_file_share: float = 0.2
    """Share of base files under the measurement's small-file limit (clustering's target)."""
    time_travel_hours: float = 24.0
    """Hours of versions clean keeps; a clean is due once the last is this old."""
    stale_after_seconds: float = 2700.0
    """A measurement older than this decides nothing (3 × the default
    `TMS_MEASURE_INTERVAL_SECONDS`; 0 = never stale)."""


DEFAULTS = Targets()

_LIMITS: dict[str, tuple[str, bool, int | float]] = {
    "max_log_files_per_slice": ("log files per slice", True, 100_000),
    "log_compaction_max_ratio": ("log bytes per base file byte", False, 100),
    "max_small_file_share": ("small files per base file", False, 1),
    "time_travel_hours": ("hours", False, 100_000),
    "stale_after_seconds": ("seconds", False, 10_000_000),
}
"""Per target: what it counts (for messages), whether it is whole, and its maximum."""
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.\- ]{1,40}")


def parse_targets(value: Any, path: Path) -> Targets:
    """The targets of an `auto` object; `SpecError` naming the key at fault."""
    names = ", ".join(_LIMITS)
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected an object of targets ({names}), {{}} for the defaults")
    given: dict[str, int | float] = {}
    for key, raw in value.items():
        limits = _LIMITS.get(key) if isinstance(key, str) else None
        if limits is None:
            shown = f" {key!r}" if isinstance(key, str) and _SAFE_KEY.fullmatch(key) else ""
            raise SpecError(path, f"unknown target{shown}; expected one of {names}", value)
        what, integer, maximum = limits
        given[key] = parse_number(raw, (*path, key), what=what, integer=integer, maximum=maximum)
    return Targets(**given)  # type: ignore[arg-type]
