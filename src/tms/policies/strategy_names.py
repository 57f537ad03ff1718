"""Trigger strategies by the name a spec gives them.

Adding a strategy: one module in `strategies/` with a `Strategy` subclass, and one line
here (then a row in the README's table of triggers).
"""

from __future__ import annotations

from tms.policies.strategies.auto import Auto
from tms.policies.strategies.commits import Commits
from tms.policies.strategies.delta_commits import DeltaCommits
from tms.policies.strategies.elapsed import Elapsed
from tms.policies.strategies.interval import Interval
from tms.policies.strategies.log_bytes import LogBytes
from tms.policies.strategies.log_files import LogFiles
from tms.policies.strategies.small_files import SmallFiles
from tms.policies.strategy import Strategy

__all__ = ["STRATEGIES"]

STRATEGIES: dict[str, type[Strategy]] = {
    "delta_commits": DeltaCommits,
    "commits": Commits,
    "elapsed_hours": Elapsed,
    "interval_hours": Interval,
    "log_bytes": LogBytes,
    "log_files": LogFiles,
    "small_files": SmallFiles,
    "auto": Auto,
}
