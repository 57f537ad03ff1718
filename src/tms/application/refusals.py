"""What the use cases turn down, beyond the store's own refusals; each caller answers them in
its protocol (the API: 409 or 422 naming the field the request sent)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NotRetryable", "NothingToCompact", "OwnPlanOnly", "Refused", "UnusableParams"]


class Refused(Exception):
    """A request a use case turns down; `str()` says why."""


class UnusableParams(Refused):
    """`extra_params` keys the operation cannot take: per key, why."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        super().__init__("; ".join(problems.values()))
        self.problems = dict(problems)


class OwnPlanOnly(Refused):
    """An index names no plan instant: tms builds an index only from a plan it schedules."""


class NothingToCompact(Refused):
    """Compaction of a copy-on-write table."""


class NotRetryable(Refused):
    """A removed operation: it is submitted again, not retried."""
