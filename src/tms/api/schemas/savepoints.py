"""Savepoints of a table: what the list shows and what a new one takes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from tms.api.schemas.common import Instant, Label, Strict, Text

__all__ = ["SavepointIn", "SavepointOut", "SavepointPage", "SavepointWritten"]

Comment = Annotated[Text, Field(max_length=1000)]


class SavepointIn(Strict):
    """Savepoint the completed write at `instant` (idempotent: an existing savepoint is
    returned as it is)."""

    instant: Instant = Field(description="the completed commit, delta commit or replacecommit")
    user: Label = Field(default="tms", description="who made it (`savepointedBy`)")
    comment: Comment = Field(default="", description="why (`comments`)")


class SavepointOut(BaseModel):
    instant: str = Field(description="the instant it keeps, which is its own time")
    completion_time: str | None = Field(description="null on version 6 timelines")
    savepointed_by: str
    savepointed_at: int = Field(description="epoch milliseconds")
    comment: str
    partitions: int
    files: int = Field(description="base and log files it keeps from the cleaner")


class SavepointPage(BaseModel):
    table_id: int
    items: list[SavepointOut] = Field(description="completed savepoints, oldest first")


class SavepointWritten(BaseModel):
    table_id: int
    savepoint: SavepointOut
    created: bool = Field(description="false when it stood already")
