"""The operation use cases, decided once for every caller: submit, cancel (with RFC-79's
cancel request on the table), retry, remove, register, and the operations trigger policies
make due.

The operator routes, the RFC-43 routes and the table-service-manager client's calls, the
scheduler's cancel scan and commit ingest call these; each caller parses what it was sent
and answers in its own protocol. A refusal is a `Refused` or a store error (`NotFound`,
`OperationConflict`, `TransitionRefused`). A use case that is a whole request (submit,
cancel, retry, remove) commits its transaction, counts what changed (`observe`) and only
then touches storage; registering and the triggers run inside the caller's transaction.
"""

from tms.application.cancel import Cancelled, TableAccess, cancel
from tms.application.manager import ClaimedJob, JobReport, LeaseLost, OperationManager, Reported
from tms.application.refusals import (
    NothingToCompact,
    NotRetryable,
    OwnPlanOnly,
    Refused,
    UnusableParams,
)
from tms.application.registration import (
    AutoRegistrationOff,
    StorageShows,
    TableRegistration,
    register,
)
from tms.application.remove import remove
from tms.application.retry import retry
from tms.application.submit import CheckedRequest, SubmitRequest, check_request, submit
from tms.application.triggers import apply_triggers

__all__ = [
    "AutoRegistrationOff",
    "Cancelled",
    "CheckedRequest",
    "ClaimedJob",
    "JobReport",
    "LeaseLost",
    "NotRetryable",
    "NothingToCompact",
    "OperationManager",
    "OwnPlanOnly",
    "Refused",
    "Reported",
    "StorageShows",
    "SubmitRequest",
    "TableAccess",
    "TableRegistration",
    "UnusableParams",
    "apply_triggers",
    "cancel",
    "check_request",
    "register",
    "remove",
    "retry",
    "submit",
]
