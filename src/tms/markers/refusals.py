"""Marker requests tms will not serve, as one error shape: 409, which Hudi's client raises as
a failed remote call, so the write fails rather than going on without its marker."""

from __future__ import annotations

from tms import metrics
from tms.http.errors import ApiError

__all__ = ["refused"]


def refused(reason: str, message: str, field: str = "markerdirpath") -> ApiError:
    """The refusal, counted by `reason` (`instant_not_pending`, `planned_by_tms`, `limit`);
    `marker_limit` for a limit, `marker_refused` otherwise."""
    metrics.MARKERS_REFUSED.labels(reason).inc()
    code = "marker_limit" if reason == "limit" else "marker_refused"
    return ApiError(409, code, f"{field}: {message}", field=field)
