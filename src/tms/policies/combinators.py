"""`any` and `all`: conditions made of other conditions, nestable.

`any` is due when one of its parts is, and says why for each part that is; `all` only when
every part is, and then says all of them. A part that is off (threshold 0) is never due, so
it never makes an `any` due and always keeps an `all` from being due.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tms.policies.strategy import Condition
from tms.store import CountedTable

__all__ = ["AllOf", "AnyOf"]


@dataclass(frozen=True)
class AnyOf:
    """Due when at least one part is."""

    parts: tuple[Condition, ...]

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        reasons = [reason for part in self.parts if (reason := part.evaluate(table, now))]
        return "; ".join(reasons) or None


@dataclass(frozen=True)
class AllOf:
    """Due when every part is."""

    parts: tuple[Condition, ...]

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        reasons: list[str] = []
        for part in self.parts:
            reason = part.evaluate(table, now)
            if reason is None:
                return None
            reasons.append(reason)
        return " and ".join(reasons) or None
