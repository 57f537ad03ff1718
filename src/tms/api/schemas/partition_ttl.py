"""A partition TTL dry run: the partitions it would delete and those it keeps, and why."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["PartitionTtlOut", "PartitionVerdictOut"]


class PartitionVerdictOut(BaseModel):
    partition: str = Field(description="the partition path ('' for the table's root)")
    last_commit_time: str | None = Field(
        description="Hudi's: the newest base instant of its latest file slices; null for none"
    )
    reason: str = Field(description="`expired`, or why it is kept")


class PartitionTtlOut(BaseModel):
    table_id: int
    as_of: str = Field(description="the instant time the ages are taken at (now)")
    ttl_days: int
    partitions_selected: list[str] = Field(
        description="the glob patterns that chose the partitions considered (none: all)"
    )
    expired: list[PartitionVerdictOut] = Field(
        description="what a partition TTL would delete now, oldest last commit first"
    )
    kept: list[PartitionVerdictOut] = Field(
        description="the selected partitions it keeps: not expired, or held by pending work"
    )
    not_selected: int = Field(description="partitions no pattern matches")
    notes: list[str] = Field(description="why nothing is considered (an unpartitioned table)")
