"""Storage calls the scheduler makes in the background, each bounded by a timeout.

Object stores and file systems can hang; a background scan must not hang with them. A call
runs on a daemon thread that is waited on for the timeout and, if it does not answer,
left behind (its result is dropped): the scan goes on with the next table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["call_bounded"]

T = TypeVar("T")


def call_bounded(fn: Callable[[], T], timeout: float, *, name: str = "tms-storage") -> T:
    """`fn()`, or `TimeoutError` when it has not returned within `timeout` seconds; its
    own exception is raised as it is."""
    box: list[T] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name=name, daemon=True)
    thread.start()
    thread.join(timeout)
    if errors:
        raise errors[0]
    if not box:
        raise TimeoutError(f"storage did not answer within {timeout:g}s")
    return box[0]
