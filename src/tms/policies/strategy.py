"""The trigger strategy interface: one measure of a table that makes an action due.

A strategy is built from its JSON parameters for one action (`parse`, which refuses bad
input with a `SpecError` naming where it is) and then only reads a `CountedTable`
(`evaluate`): no database, no clock but the `now` it is given, so each one is tested alone.
Combinators (`any`, `all`) are `Condition`s too, so specs nest.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Protocol, Self

from tms.store import CountedTable, ServiceAction

__all__ = [
    "SINCE",
    "Condition",
    "Path",
    "SpecError",
    "Strategy",
    "commits_since",
    "parse_number",
]

Path = tuple[str | int, ...]
"""Where a value sits in a table's `triggers` object, e.g. `("compaction", "any", 1)`."""


class SpecError(ValueError):
    """A trigger spec that cannot be used; `path` says where (relative to `triggers`),
    `value` is what was found there."""

    def __init__(self, path: Sequence[str | int], problem: str, value: Any = None) -> None:
        self.path: Path = tuple(path)
        self.problem = problem
        self.value = value
        where = ".".join(str(part) for part in self.path) or "triggers"
        super().__init__(f"{where}: {problem}")


class Condition(Protocol):
    """Anything a trigger spec parses into: a strategy or a combination of them."""

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        """Why the action is due now (for the operation's first event), or None."""
        ...


class Strategy(ABC):
    """One registered trigger strategy (see `strategy_names.py`), bound to the action it
    watches, since the same measure reads different counters for different actions."""

    actions: ClassVar[frozenset[ServiceAction]]
    """The actions it may watch; a spec using it for another is refused."""

    @classmethod
    @abstractmethod
    def parse(cls, value: Any, action: ServiceAction, path: Path) -> Self:
        """The strategy from its JSON parameters (the value under its name); `SpecError`
        naming `path` when they are unusable."""

    @abstractmethod
    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        """Why `table` is due for the action now, with the figures, or None."""


_COUNTERS = {
    ServiceAction.COMPACTION: "delta_commits_since_compaction",
    ServiceAction.CLUSTERING: "commits_since_clustering",
    ServiceAction.CLEAN: "commits_since_clean",
    ServiceAction.METADATA_COMPACTION: "commits_since_metadata_compaction",
    ServiceAction.LOG_COMPACTION: "delta_commits_since_log_compaction",
    ServiceAction.ARCHIVAL: "commits_since_archival",
}

SINCE = {
    ServiceAction.COMPACTION: "since the last compaction",
    ServiceAction.CLUSTERING: "since the last clustering",
    ServiceAction.CLEAN: "since the last clean",
    ServiceAction.METADATA_COMPACTION: "since the last metadata compaction",
    ServiceAction.LOG_COMPACTION: "since the last log compaction or compaction",
    ServiceAction.ARCHIVAL: "since the policy's last archival",
    ServiceAction.PARTITION_TTL: "since the last partition TTL",
}
"""How reasons name the point each action's counters restart from."""


def commits_since(table: CountedTable, action: ServiceAction) -> int:
    """The action's own commit counter: delta commits for compaction and log compaction,
    writes for clean, clustering and archival, metadata table delta commits for metadata
    compaction."""
    value: int = getattr(table, _COUNTERS[action])
    return value


def parse_number(
    value: Any, path: Path, *, what: str, integer: bool, maximum: int | float
) -> int | float:
    """A JSON number from 0 to `maximum` (booleans, NaN and infinities refused)."""
    kind = "a whole number" if integer else "a number"
    top = maximum if isinstance(maximum, int) else f"{maximum:g}"
    problem = f"expected {kind} of {what} from 0 to {top} (0 = off)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(path, problem, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(path, problem, value)
        if integer:
            if not value.is_integer():
                raise SpecError(path, problem, value)
            value = int(value)
    if not 0 <= value <= maximum:
        raise SpecError(path, problem, value)
    number: int | float = value
    return number
