"""ORM rows to response models (the parts that need settings or other rows)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from tms.api.schemas import OperationOut, TableOut, Thresholds
from tms.config import Settings
from tms.policies import Thresholds as PolicyThresholds
from tms.policies import thresholds_for
from tms.store import Operation, Tbl, tables_by_id

__all__ = ["operation_out", "operations_out", "table_out"]


def table_out(table: Tbl, settings: Settings, *, created: bool | None = None) -> TableOut:
    effective = thresholds_for(table.policy or {}, PolicyThresholds.from_settings(settings))
    return TableOut(
        id=table.id,
        db_name=table.db_name,
        table_name=table.table_name,
        base_path=table.base_path,
        owner=table.owner,
        queue=table.queue,
        priority=table.priority,
        enabled_actions=list(table.enabled_actions or []),
        policy=dict(table.policy or {}),
        thresholds=Thresholds(
            compaction_delta_commits=effective.compaction_delta_commits,
            clean_commits=effective.clean_commits,
            clustering_commits=effective.clustering_commits,
            metadata_compaction_delta_commits=effective.metadata_compaction_delta_commits,
            log_compaction_delta_commits=effective.log_compaction_delta_commits,
            archival_commits=effective.archival_commits,
            ttl_interval_hours=effective.ttl_interval_hours,
        ),
        table_type=table.table_type,
        table_version=table.table_version,
        last_commit_instant=table.last_commit_instant,
        delta_commits_since_compaction=table.delta_commits_since_compaction,
        commits_since_clean=table.commits_since_clean,
        commits_since_clustering=table.commits_since_clustering,
        commits_since_metadata_compaction=table.commits_since_metadata_compaction,
        delta_commits_since_log_compaction=table.delta_commits_since_log_compaction,
        commits_since_archival=table.commits_since_archival,
        log_bytes_since_compaction=table.log_bytes_since_compaction,
        log_files_since_compaction=table.log_files_since_compaction,
        small_files_since_clustering={
            str(k): int(v) for k, v in (table.small_files_since_clustering or {}).items()
        },
        last_compaction_at=table.last_compaction_at,
        last_clustering_at=table.last_clustering_at,
        last_clean_at=table.last_clean_at,
        last_partition_ttl_at=table.last_partition_ttl_at,
        last_notification_at=table.last_notification_at,
        last_commit_seen_at=table.last_commit_seen_at,
        last_pulled_at=table.last_pulled_at,
        paused=table.paused,
        storage_options=sorted(table.storage_options or {}),
        created_at=table.created_at,
        updated_at=table.updated_at,
        created=created,
    )


def operations_out(session: Session, operations: Sequence[Operation]) -> list[OperationOut]:
    """One query for the names of all the operations' tables."""
    tables = tables_by_id(session, (op.tbl_id for op in operations))
    return [OperationOut.build(op, tables.get(op.tbl_id)) for op in operations]


def operation_out(session: Session, operation: Operation) -> OperationOut:
    result: OperationOut = OperationOut.build(operation, session.get(Tbl, operation.tbl_id))
    return result
