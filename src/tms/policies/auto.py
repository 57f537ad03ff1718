"""What the `auto` trigger decides: from a table's latest measurement and its counters,
whether an action is due for the targets its policy states, and why, with the figures, the
target and the expected cost.

Pure: no database, no clock but the `now` given. A table without a measurement, or whose
latest is older than `stale_after_seconds`, is due for nothing (no fixed threshold is
implied in its place). The rules, per action (README, "The auto trigger"):

- compaction and log compaction: due when the latest slices' log files per slice at p95
  exceed `max_log_files_per_slice`. Log compaction instead of compaction when the table
  enables logcompaction with an `auto` trigger of its own, no log compaction ran since the
  last compaction (it leaves the slices' log files in place, so a second would not help),
  and the slices' log bytes at p95 are at most `log_compaction_max_ratio` of the median base
  file;
- clustering: due when more than `max_small_file_share` of the base files are under the
  measurement's small-file limit, at least 2 of them, and the table had a write since the
  last clustering;
- clean: due when the table had a write since the last clean and the last clean (or the
  registration) is `time_travel_hours` old.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from tms.policies.auto_targets import Targets
from tms.store import CountedTable, Measured, ServiceAction

__all__ = ["AUTO_ACTIONS", "decide", "expected_cost", "fresh_measurement"]

AUTO_ACTIONS = frozenset(
    {
        ServiceAction.COMPACTION,
        ServiceAction.LOG_COMPACTION,
        ServiceAction.CLUSTERING,
        ServiceAction.CLEAN,
    }
)
"""The actions an `auto` trigger decides."""


def decide(
    action: ServiceAction, targets: Targets, table: CountedTable, now: datetime
) -> str | None:
    """Why `action` is due for `table` now under `targets`, or None."""
    measured = fresh_measurement(table, targets, now)
    if measured is None:
        return None
    if action in (ServiceAction.COMPACTION, ServiceAction.LOG_COMPACTION):
        choice = _merge(targets, table, measured.layout)
        why = choice[1] if choice is not None and choice[0] is action else None
    elif action is ServiceAction.CLUSTERING:
        why = _clustering(targets, table, measured.layout)
    elif action is ServiceAction.CLEAN:
        why = _clean(targets, table, now)
    else:
        why = None
    return None if why is None else f"{why}; {expected_cost(measured, action)}"


def fresh_measurement(table: CountedTable, targets: Targets, now: datetime) -> Measured | None:
    """The table's latest measurement, unless it is older than the targets allow."""
    measured = table.measurement
    if measured is None:
        return None
    stale = targets.stale_after_seconds
    if stale > 0 and now - measured.measured_at > timedelta(seconds=stale):
        return None
    return measured


def expected_cost(measured: Measured, action: ServiceAction) -> str:
    """The mean executor-seconds of the action's attempts in the measurement's window."""
    cost = measured.services.get(action.value)
    if not isinstance(cost, Mapping):
        return "cost unknown"
    attempts, seconds = _number(cost.get("attempts")), _number(cost.get("executor_seconds"))
    if attempts < 1:
        return "cost unknown"
    return f"expected cost {seconds / attempts:.0f} executor-seconds"


def _number(value: Any) -> float:
    """A figure of the measurement (anything else counts as 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def _stat(layout: Mapping[str, Any], name: str, stat: str) -> float:
    """One statistic of a spread of the layout (`log_files_per_slice`, `p95`)."""
    spread = layout.get(name)
    return _number(spread.get(stat)) if isinstance(spread, Mapping) else 0.0


def _merge(
    targets: Targets, table: CountedTable, layout: Mapping[str, Any]
) -> tuple[ServiceAction, str] | None:
    """Compaction or log compaction, with the reason, or None (see the module doc)."""
    target = targets.max_log_files_per_slice
    files = _stat(layout, "log_files_per_slice", "p95")
    if target <= 0 or files <= target:
        return None
    figures = f"{files:.0f} log files per slice at p95, target {target}"
    ratio = targets.log_compaction_max_ratio
    log_bytes = _stat(layout, "log_bytes_per_slice", "p95")
    base = _stat(layout, "base_file_bytes", "p50")
    if _log_compaction_allowed(table) and ratio > 0 and base > 0 and log_bytes <= ratio * base:
        share = log_bytes / base
        return ServiceAction.LOG_COMPACTION, (
            f"log compacting: {figures}; {log_bytes:.0f} log bytes per slice at p95, "
            f"{share:.1%} of the median base file (log compaction up to {ratio:.1%})"
        )
    return ServiceAction.COMPACTION, f"compacting: {figures}"


def _log_compaction_allowed(table: CountedTable) -> bool:
    """The table enables logcompaction with an `auto` trigger of its own, and no log
    compaction ran since the last compaction (its counter would have restarted)."""
    if ServiceAction.LOG_COMPACTION not in table.enabled_actions:
        return False
    triggers = table.policy.get("triggers")
    spec = (
        triggers.get(ServiceAction.LOG_COMPACTION.value) if isinstance(triggers, Mapping) else None
    )
    if not isinstance(spec, Mapping) or "auto" not in spec:
        return False
    return table.delta_commits_since_log_compaction >= table.delta_commits_since_compaction


def _clustering(targets: Targets, table: CountedTable, layout: Mapping[str, Any]) -> str | None:
    share_target = targets.max_small_file_share
    small = int(_number(layout.get("small_files")))
    bases = int(_stat(layout, "base_file_bytes", "count"))
    if share_target <= 0 or bases < 1 or small < 2 or table.commits_since_clustering < 1:
        return None
    share = small / bases
    if share <= share_target:
        return None
    limit = int(_number(layout.get("small_file_limit")))
    return (
        f"clustering: {small} of {bases} base files under {limit} bytes ({share:.0%}), "
        f"target at most {share_target:.0%}"
    )


def _clean(targets: Targets, table: CountedTable, now: datetime) -> str | None:
    hours = targets.time_travel_hours
    writes = table.commits_since_clean
    if hours <= 0 or writes < 1:
        return None
    last = table.last_run_at.get(ServiceAction.CLEAN)
    start = last if last is not None else table.created_at
    if start is None or now - start < timedelta(hours=hours):
        return None
    since = "since the last clean" if last is not None else "since the table was registered"
    age = (now - start) / timedelta(hours=1)
    kind = "commit" if writes == 1 else "commits"
    return (
        f"cleaning: {age:.1f} hours {since}, {writes} new {kind}, "
        f"time travel target {hours:g} hours"
    )
