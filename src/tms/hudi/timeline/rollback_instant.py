"""A rollback instant on a timeline: the plan of files to delete (requested), the deletes
(inflight), and the metadata of what was deleted (completed), in Hudi's Avro forms. Shared by
every rollback we do, of data table instants and of metadata table delta commits."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tms.hudi.avro import codec as avro_codec
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import request, transition

__all__ = ["RollbackInstant"]


@dataclass
class RollbackInstant:
    """One rollback of `target` (an instant time and action) at `rollback_time`, deleting
    `files` (paths relative to the storage, by partition)."""

    storage: Storage
    config: TableConfig
    rollback_time: str
    target: tuple[str, Action]
    files: dict[str, list[str]]
    started: float = field(default_factory=time.time)
    deleted: list[str] = field(default_factory=list)
    _pending: Instant | None = None
    _partition_metadata: dict[str, dict[str, object]] = field(default_factory=dict)

    @property
    def _instant_info(self) -> dict[str, str]:
        return {"commitTime": self.target[0], "action": self.target[1].value}

    def start(self) -> None:
        """Write the plan (requested), then move the rollback to inflight."""
        plan = {
            "instantToRollback": self._instant_info,
            "RollbackRequests": [
                {"partitionPath": p, "filesToBeDeleted": [self.storage.uri(f) for f in paths]}
                for p, paths in sorted(self.files.items())
            ],
            "version": 1,
        }
        plan_bytes = avro_codec.encode("HoodieRollbackPlan", plan)
        pending = request(
            self.storage, self.config, self.rollback_time, Action.ROLLBACK, plan_bytes
        )
        self._pending = transition(self.storage, self.config, pending, State.INFLIGHT)

    def delete_files(self) -> None:
        """Delete the planned files; one already gone counts as deleted (a retried rollback)."""
        uri = self.storage.uri
        for partition, paths in sorted(self.files.items()):
            done = [p for p in paths if self.storage.delete(p) or not self.storage.exists(p)]
            self.deleted += done
            self._partition_metadata[partition] = {
                "partitionPath": partition,
                "successDeleteFiles": [uri(p) for p in done],
                "failedDeleteFiles": [uri(p) for p in paths if p not in done],
            }

    def complete(self) -> Instant:
        """Complete the rollback with the metadata of what was deleted."""
        if self._pending is None:
            raise RuntimeError("the rollback was not started")
        metadata = {
            "startRollbackTime": self.rollback_time,
            "timeTakenInMillis": int((time.time() - self.started) * 1000),
            "totalFilesDeleted": len(self.deleted),
            "commitsRollback": [self.target[0]],
            "partitionMetadata": self._partition_metadata,
            "version": 1,
            "instantsRollback": [self._instant_info],
        }
        content = avro_codec.encode("HoodieRollbackMetadata", metadata)
        return transition(self.storage, self.config, self._pending, State.COMPLETED, content)
