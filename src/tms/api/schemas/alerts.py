"""Alerts as the API shows them: briefly on their operation, whole in `/v1/alerts`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from tms.store import Alert, AlertStatus

__all__ = ["AlertBrief", "AlertOut", "AlertPage"]


class AlertBrief(BaseModel):
    """An alert's delivery state (on the operation it is about)."""

    id: int
    kind: str = Field(description="operation_failed or table_silent")
    status: AlertStatus
    deliveries: int = Field(description="webhook tries so far")
    last_error: str | None = Field(description="why the last failed try failed")
    created_at: datetime
    delivered_at: datetime | None

    @classmethod
    def of(cls, alert: Alert) -> AlertBrief:
        return cls.model_validate(alert, from_attributes=True)


class AlertOut(AlertBrief):
    table_id: int
    operation_id: int | None
    next_attempt_at: datetime = Field(description="when a pending alert is tried next")
    payload: dict[str, Any] = Field(description="the JSON body the webhook receives")

    @classmethod
    def of(cls, alert: Alert) -> AlertOut:
        return cls(
            **AlertBrief.of(alert).model_dump(),
            table_id=alert.tbl_id,
            operation_id=alert.operation_id,
            next_attempt_at=alert.next_attempt_at,
            payload=alert.payload,
        )


class AlertPage(BaseModel):
    items: list[AlertOut]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page")
