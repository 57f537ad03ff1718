"""What most strategies share: one figure of the table at or above a threshold.

The threshold is inclusive (5 delta commits are due at the fifth) and 0 turns the strategy
off, as the service's count settings always have.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Self

from tms.policies.strategy import Path, Strategy, parse_number
from tms.store import CountedTable, ServiceAction

__all__ = ["Threshold"]


@dataclass(frozen=True)
class Threshold(Strategy):
    """Due when `figure(table)` reaches `threshold` (> 0)."""

    action: ServiceAction
    threshold: int

    unit: ClassVar[str]
    """What the parameter counts, for error messages ("delta commits")."""
    maximum: ClassVar[int] = 1_000_000

    @classmethod
    def parse(cls, value: Any, action: ServiceAction, path: Path) -> Self:
        return cls(
            action, int(parse_number(value, path, what=cls.unit, integer=True, maximum=cls.maximum))
        )

    @abstractmethod
    def figure(self, table: CountedTable) -> tuple[int, str]:
        """The table's figure and what it is, as the reason says it."""

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        if self.threshold <= 0:
            return None
        count, what = self.figure(table)
        if count < self.threshold:
            return None
        return f"{count} {what} (threshold {self.threshold})"
