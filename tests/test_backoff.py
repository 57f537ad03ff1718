"""The retry delay: exponential, capped, with jitter around it."""

from __future__ import annotations

from tms.backoff import Backoff


def test_backoff_formula() -> None:
    backoff = Backoff(base_seconds=5, factor=2, max_seconds=60, jitter=0.1)
    assert [backoff.delay(n, rand=lambda: 0.5) for n in (1, 2, 3, 5, 100)] == [5, 10, 20, 60, 60]
    assert backoff.delay(1, rand=lambda: 0.0) == 4.5
    assert backoff.delay(1, rand=lambda: 1.0) == 5.5
