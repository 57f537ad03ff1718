"""What a job's result says about who ran its plans, kept on its operation.

A job reports in its result's figures, whatever its outcome, the executor that ran
(`executor`: `native` or `hudi`, absent when the job never got that far) and, when `auto`
handed the table to Hudi's code, why the native executor declined it (`native_declined`).
The operation keeps the latest attempt's report: a retry's replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from tms.executor_choice import HUDI, NATIVE
from tms.store.models import Operation

__all__ = ["MAX_DECLINED_CHARS", "record_executor_report"]

MAX_DECLINED_CHARS = 2000
"""The longest reason kept: a refusal's message, not a log."""


def record_executor_report(
    session: Session, operation_id: int, figures: Mapping[str, Any] | None
) -> bool:
    """Copy the figures' `executor` and `native_declined` onto the operation, in the
    caller's transaction; False (nothing written) when they name no executor that runs."""
    ran = (figures or {}).get("executor")
    if ran not in (NATIVE, HUDI):
        return False
    declined = (figures or {}).get("native_declined")
    reason = _cut(declined) if isinstance(declined, str) and declined.strip() else None
    session.execute(
        update(Operation)
        .where(Operation.id == operation_id)
        .values(executed_by=ran, native_declined=reason)
    )
    return True


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_DECLINED_CHARS else text[: MAX_DECLINED_CHARS - 1] + "…"
