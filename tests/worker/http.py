"""HTTP calls of the worker tests. The service answers from the process that also runs Spark
jobs and workers; on a loaded 2-core machine an answer can take longer than httpx's default
5 s, so each call waits up to a minute: the tests wait on outcomes, never on speed."""

from __future__ import annotations

from typing import Any

import httpx

TIMEOUT = 60.0


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, timeout=TIMEOUT, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, timeout=TIMEOUT, **kwargs)
