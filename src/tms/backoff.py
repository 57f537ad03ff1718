"""Retry delays: exponential backoff, capped, with jitter (River's ±10% by default).

A policy, not a statement: the application decides with it when a failed attempt runs again
(`application.attempt_end`) and `alerts` when a refused alert is tried again; the store only
applies the time they chose.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = ["Backoff"]

_MAX_EXPONENT = 60  # factor ** 60 already exceeds any sane cap; keeps floats finite


@dataclass(frozen=True)
class Backoff:
    """`delay(n)` = min(max, base · factor^(n-1)) · (1 ± jitter) after the n-th launch failed.

    The one computation of a retry's delay: `application.attempt_end` applies it to failed,
    exited, unlaunched and lost attempts alike, `alerts` to a webhook's refusals.
    """

    base_seconds: float = 5.0
    factor: float = 2.0
    max_seconds: float = 600.0
    jitter: float = 0.1

    @classmethod
    def from_settings(cls, settings: Settings) -> Backoff:
        return cls(
            settings.retry_base_seconds,
            settings.retry_factor,
            settings.retry_max_seconds,
            settings.retry_jitter,
        )

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        raw = min(self.max_seconds, self.base_seconds * self.factor**exponent)
        return max(0.0, raw * (1 + self.jitter * (2 * rand() - 1)))

    def next_run_at(self, now: datetime, attempt: int) -> datetime:
        return now + timedelta(seconds=self.delay(attempt))
