"""The PySpark job of one attempt: talks to the service over HTTP (spec, heartbeats,
result) with the attempt's token and runs the table service; never touches the database."""

from tms.jobs.client import (
    ApiRejected,
    ApiUnavailable,
    AttemptGone,
    HeartbeatReply,
    JobApiError,
    JobClient,
    JobSpec,
)
from tms.jobs.runner import JobRunner, Report

__all__ = [
    "ApiRejected",
    "ApiUnavailable",
    "AttemptGone",
    "HeartbeatReply",
    "JobApiError",
    "JobClient",
    "JobRunner",
    "JobSpec",
    "Report",
]
