"""A writer that notifies the service as a Hudi writer with `hoodie.write.commit.callback.on`
does: each commit is made with the project's `HudiWriter`, then announced by the HTTP commit
callback, whose write stats are read back from the commit's real metadata on the timeline.

The payload has the shape released Hudi writers send (HUDI-NOTES.md): `commitTime`,
`tableName`, `basePath`, `hoodieWriteStat` (Jackson's form of every write stat), and the
`{"present": true}` that `commitActionType` and `extraMetadata` degrade to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from tms.config import DEFAULT_CALLBACK_KEY
from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.testing.sample_writer.writer import HudiWriter

__all__ = [
    "CALLBACK_HEADERS",
    "CALLBACK_PATH",
    "CallbackWriter",
    "callback_payload",
    "commit_metadata",
    "synthetic_callback",
]

CALLBACK_PATH = "/v1/hoodie/service/commit"
CALLBACK_HEADERS = {"HUDI-CALLBACK-KEY": DEFAULT_CALLBACK_KEY}


def commit_metadata(base_path: str, instant: str) -> CommitMetadata:
    """The metadata of a completed commit or delta commit (timeline layout 1)."""
    hoodie = Path(base_path) / ".hoodie"
    for action in ("deltacommit", "commit"):
        path = hoodie / f"{instant}.{action}"
        if path.is_file():
            return CommitMetadata.from_json(path.read_bytes())
    raise FileNotFoundError(f"no completed commit {instant} under {hoodie}")


def callback_payload(base_path: str, table_name: str, instant: str) -> dict[str, Any]:
    """Hudi's `HoodieWriteCommitCallbackMessage` for a completed commit of the table."""
    metadata = commit_metadata(base_path, instant)
    return {
        "commitTime": instant,
        "tableName": table_name,
        "basePath": base_path,
        "hoodieWriteStat": [stat.to_json_dict() for stat in metadata.write_stats()],
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
    }


def synthetic_callback(base_path: str, table_name: str, instant: str) -> dict[str, Any]:
    """A callback naming one log file of partition `sf` that is not on storage: load for the
    service's callback path, where nothing reads the files a commit names."""
    file_id = f"{instant[-6:]}-0"
    log = f".{file_id}_20260101000000000.log.1_0-1-0"
    stat = {
        "fileId": file_id,
        "path": f"sf/{log}",
        "partitionPath": "sf",
        "prevCommit": "20260101000000000",
        "numWrites": 3,
        "totalWriteBytes": 1024,
        "logVersion": 1,
        "logOffset": 0,
        "baseFile": f"{file_id}_0-1-0_20260101000000000.parquet",
        "logFiles": [log],
    }
    return {
        "commitTime": instant,
        "tableName": table_name,
        "basePath": base_path,
        "hoodieWriteStat": [stat],
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
    }


class CallbackWriter:
    """Commits to one table and notifies the service at `client`'s base URL."""

    def __init__(self, writer: HudiWriter, client: httpx.Client) -> None:
        self.writer = writer
        self.client = client

    @property
    def base_path(self) -> str:
        return self.writer.table.base_path

    @property
    def table_name(self) -> str:
        return self.writer.config.table_name

    def commit(self, operation: str, batch: pa.Table) -> str:
        """Commit without notifying (`insert`, `upsert` or `delete`); the instant time."""
        write = {
            "insert": self.writer.insert,
            "upsert": self.writer.upsert,
            "delete": self.writer.delete,
        }[operation]
        return write(batch)

    def notify(self, instant: str) -> dict[str, Any]:
        """POST the commit callback of `instant`; the service's answer (it must be 200)."""
        payload = callback_payload(self.base_path, self.table_name, instant)
        response = self.client.post(CALLBACK_PATH, json=payload, headers=CALLBACK_HEADERS)
        assert response.status_code == 200, f"callback {instant}: {response.text}"
        answer: dict[str, Any] = response.json()
        return answer

    def write(self, operation: str, batch: pa.Table) -> tuple[str, dict[str, Any]]:
        """Commit, then notify, as a writer with the callback on does."""
        instant = self.commit(operation, batch)
        return instant, self.notify(instant)
