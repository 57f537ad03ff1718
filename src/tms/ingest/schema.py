"""Hudi's HTTP commit callback body, as released writers really send it.

`commitActionType` and `extraMetadata` arrive as `{"present": true}` from released writers
(Jackson serialises Hudi's `Option`), so they are typed `Any` and interpreted, never
validated away; unknown fields anywhere are accepted and ignored.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from tms.http.fields import BasePath, Identifier, Instant, Text

__all__ = ["CallbackIn", "CallbackOut", "WriteStatIn"]

Long = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]
"""A Java long as Jackson writes it: a JSON integer (`false` is not 0)."""


class WriteStatIn(BaseModel):
    """The fields of one `HoodieWriteStat` (or delta stat) that the summary uses."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    file_id: Text | None = Field(None, alias="fileId")
    path: Text | None = None
    partition_path: Text | None = Field(None, alias="partitionPath")
    num_writes: Long | None = Field(None, alias="numWrites")
    total_write_bytes: Long | None = Field(None, alias="totalWriteBytes")
    file_size_in_bytes: Long | None = Field(None, alias="fileSizeInBytes")
    log_version: Long | None = Field(None, alias="logVersion")
    base_file: Text | None = Field(None, alias="baseFile")
    log_files: list[Any] | None = Field(None, alias="logFiles")


class CallbackIn(BaseModel):
    """`HoodieWriteCommitCallbackMessage`."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    commit_time: Instant = Field(alias="commitTime")
    table_name: Identifier = Field(alias="tableName")
    base_path: BasePath = Field(alias="basePath")
    write_stats: list[WriteStatIn] | None = Field(None, alias="hoodieWriteStat")
    commit_action_type: Any = Field(
        None, alias="commitActionType", description='a string, or {"present": true}'
    )
    extra_metadata: Any = Field(None, alias="extraMetadata")


class CallbackOut(BaseModel):
    table_id: int
    commit_time: str
    action: str = Field(description="the commit's action, as given or inferred")
    action_source: str = Field(description="payload | write_stats | timeline | table_type")
    new: bool = Field(description="false when this commit was already stored")
    table_registered: bool = Field(description="true when this call auto-registered the table")
    operations_created: list[int] = Field(description="operations the policies created")
