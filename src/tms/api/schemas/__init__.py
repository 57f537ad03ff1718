"""Request and response models of the API, separate from the ORM models in `tms.store`."""

from tms.api.schemas.errors import ErrorDetail, ErrorOut, Problem
from tms.api.schemas.hudi_client import ClientQuery
from tms.api.schemas.jobs import (
    HeartbeatIn,
    HeartbeatOut,
    InstantIn,
    InstantOut,
    JobOutcome,
    ResultIn,
    ResultOut,
    SpecOut,
)
from tms.api.schemas.operations import (
    AttemptOut,
    ClientOut,
    EventOut,
    OperationDetail,
    OperationOut,
    OperationPage,
    RemoveIn,
    SubmitIn,
    SubmitOut,
)
from tms.api.schemas.tables import (
    PolicyIn,
    RegisterIn,
    TableIn,
    TableOut,
    TablePage,
    TablePatch,
    Thresholds,
    TimelineInstant,
    TimelineOut,
)

__all__ = [
    "AttemptOut",
    "ClientOut",
    "ClientQuery",
    "ErrorDetail",
    "ErrorOut",
    "EventOut",
    "HeartbeatIn",
    "HeartbeatOut",
    "InstantIn",
    "InstantOut",
    "JobOutcome",
    "OperationDetail",
    "OperationOut",
    "OperationPage",
    "PolicyIn",
    "Problem",
    "RegisterIn",
    "RemoveIn",
    "ResultIn",
    "ResultOut",
    "SpecOut",
    "SubmitIn",
    "SubmitOut",
    "TableIn",
    "TableOut",
    "TablePage",
    "TablePatch",
    "Thresholds",
    "TimelineInstant",
    "TimelineOut",
]
