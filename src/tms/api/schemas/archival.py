"""The archival dry run of a table: what Hudi's archiver would move out of the active timeline
now, and why it stops there."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["ArchivalLimit", "ArchivalPlanOut", "ArchivedInstant"]


class ArchivedInstant(BaseModel):
    instant: str
    action: str = Field(description="commit, deltacommit, replacecommit, clean or rollback")
    completion_time: str | None = Field(description="null on version 6 timelines")


class ArchivalLimit(BaseModel):
    rule: str = Field(
        description="pending, compaction, clustering, metadata_compaction or savepoint"
    )
    instant: str = Field(description="the rule keeps the commits requested from this one on")
    reason: str


class ArchivalPlanOut(BaseModel):
    table_id: int
    due: bool = Field(description="whether an archival would archive anything now")
    keep_min: int = Field(description="completed commits kept, as Hudi applies it")
    keep_max: int = Field(description="archival starts above this many completed commits")
    configured_keep_min: int = Field(
        description="hoodie.keep.min.commits as asked: the request's, the table policy's, the "
        "table's or Hudi's 20 (Hudi raises it to what its cleaner retains)"
    )
    configured_keep_max: int = Field(description="hoodie.keep.max.commits as asked (Hudi's 30)")
    completed_commits: int = Field(description="completed commits on the active timeline")
    instants: list[ArchivedInstant] = Field(description="what it would archive, oldest first")
    commits_archived: int
    earliest_kept: str | None = Field(description="the earliest completed commit left active")
    stopped_by: str = Field(
        description="keep_max (nothing due), keep_min, or the rule of `limits` it stops at"
    )
    reason: str
    limits: list[ArchivalLimit] = Field(description="every rule that keeps commits")
