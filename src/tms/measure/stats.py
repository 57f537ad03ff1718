"""Order statistics of a table's files: nearest-rank percentiles, so every figure is a real
file's (or slice's) value a user can find on storage, never an interpolation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = ["Spread", "percentile", "spread"]


def percentile(ordered: Sequence[int], p: float) -> int:
    """The nearest-rank `p`-th percentile (0 < p <= 100) of `ordered` (sorted, not empty):
    the smallest value at or above which `p` percent of the values lie."""
    if not ordered:
        raise ValueError("no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} is not in (0, 100]")
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True)
class Spread:
    """How values are spread: their count, total, 5th, 50th and 95th percentiles and maximum
    (all 0 when there are none)."""

    count: int = 0
    total: int = 0
    p5: int = 0
    p50: int = 0
    p95: int = 0
    max: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def spread(values: Sequence[int]) -> Spread:
    """The spread of `values` (in any order)."""
    if not values:
        return Spread()
    ordered = sorted(values)
    return Spread(
        count=len(ordered),
        total=sum(ordered),
        p5=percentile(ordered, 5),
        p50=percentile(ordered, 50),
        p95=percentile(ordered, 95),
        max=ordered[-1],
    )
