"""The timeline: every instant of a table, its state, and the metadata and plans it holds."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.archived import ArchivedTimeline
from tms.hudi.timeline.instant import COMPLETED_ACTION, Action, Instant, State, parse_instant_file

CLUSTER_OPERATION = "CLUSTER"
WRITE_COMMIT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
"""Completed actions that wrote data."""

InstantKey = tuple[str, Action]
"""An instant's identity: its time and its action family. Times alone are not unique: a
savepoint has the time of the commit it saves."""


def instant_key(instant: Instant) -> InstantKey:
    """Requested and completed files of one instant share a key (a compaction completes as
    a commit, a clustering as a replacecommit)."""
    return instant.requested_time, COMPLETED_ACTION.get(instant.action, instant.action)


@dataclass(frozen=True)
class Timeline:
    """All instants of one table as of one listing, oldest first."""

    storage: Storage
    config: TableConfig
    instants: tuple[Instant, ...]
    files: dict[InstantKey, dict[State, str]] = field(default_factory=dict)
    """Per instant, the instant file recording each state it reached."""
    pending_actions: dict[InstantKey, Action] = field(default_factory=dict)
    """Per instant, the action its requested file named (compaction, clustering…)."""

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> Timeline:
        base = config.timeline_path
        files: dict[InstantKey, dict[State, str]] = {}
        furthest: dict[InstantKey, Instant] = {}
        pending_actions: dict[InstantKey, Action] = {}
        for entry in storage.list_dir(base):
            if entry.is_dir:
                continue
            instant = parse_instant_file(entry.name)
            if instant is None:
                continue
            key = instant_key(instant)
            files.setdefault(key, {})[instant.state] = f"{base}/{entry.name}"
            if instant.state is State.REQUESTED:
                pending_actions[key] = instant.action
            current = furthest.get(key)
            if current is None or instant.state > current.state:
                furthest[key] = instant
        instants = tuple(sorted(furthest.values(), key=lambda i: i.requested_time))
        return cls(storage, config, instants, files, pending_actions)

    # Selection ---------------------------------------------------------------------------

    def get(self, requested_time: str) -> Instant | None:
        """The instant of that time; a write rather than the savepoint that shares its time."""
        return self._by_time.get(requested_time)

    @functools.cached_property
    def _by_time(self) -> dict[str, Instant]:
        """Instants by time, built once: the file-system view asks for every data file."""
        index: dict[str, Instant] = {}
        for instant in self.instants:
            current = index.get(instant.requested_time)
            if current is None or current.action is Action.SAVEPOINT:
                index[instant.requested_time] = instant
        return index

    @functools.cached_property
    def archived(self) -> ArchivedTimeline:
        """Instants archived out of this timeline (layout 2 history), read on first use."""
        return ArchivedTimeline.load(self.storage, self.config)

    def completion_time(self, requested_time: str) -> str | None:
        """When the instant requested at that time completed; None while it is pending or when
        nothing records it. A legacy instant (no completion time in its name) completed at its
        requested time; one older than the active timeline is looked up in the history."""
        instant = self.get(requested_time)
        if instant is not None:
            return (instant.completion_time or requested_time) if instant.is_completed else None
        if self.instants and requested_time < self.instants[0].requested_time:
            return self.archived.completion_time(requested_time)
        return None

    def completed(self, actions: Iterable[Action] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [
            i for i in self.instants if i.is_completed and (wanted is None or i.action in wanted)
        ]

    def pending(self, actions: Iterable[Action] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [i for i in self.instants if i.is_pending and (wanted is None or i.action in wanted)]

    def commits(self) -> list[Instant]:
        """Completed instants that wrote data: commit, deltacommit and replacecommit."""
        return self.completed(WRITE_COMMIT_ACTIONS)

    def latest_completed(self, actions: Iterable[Action] | None = None) -> Instant | None:
        done = self.completed(actions)
        return done[-1] if done else None

    def is_completed(self, requested_time: str) -> bool:
        instant = self.get(requested_time)
        return instant is not None and instant.is_completed

    def origin_action(self, instant: Instant) -> Action:
        """The action an instant was requested as: a completed compaction shows as commit."""
        return self.pending_actions.get(instant_key(instant), instant.action)

    def pending_writes(self) -> list[Instant]:
        """Pending writers' instants: commits, delta commits and replacecommits that are not
        a compaction or clustering plan."""
        return [
            i
            for i in self.pending(WRITE_COMMIT_ACTIONS)
            if not self.is_compaction(i) and not self.is_clustering(i)
        ]

    def pending_compactions(self) -> list[Instant]:
        return self.pending((Action.COMPACTION,))

    def pending_clusterings(self) -> list[Instant]:
        """Pending clustering: `clustering` (layout 2) or a replacecommit whose plan clusters."""
        return [
            i
            for i in self.pending((Action.CLUSTERING, Action.REPLACE_COMMIT))
            if self.is_clustering(i)
        ]

    def is_compaction(self, instant: Instant) -> bool:
        return self.origin_action(instant) is Action.COMPACTION

    def is_clustering(self, instant: Instant) -> bool:
        if self.origin_action(instant) is Action.CLUSTERING:
            return True
        if instant.action is not Action.REPLACE_COMMIT:
            return False
        requested = self.requested_replace_metadata(instant)
        return requested is not None and requested.get("operationType") == CLUSTER_OPERATION

    def last_compaction(self) -> Instant | None:
        done = [i for i in self.completed((Action.COMMIT,)) if self.is_compaction(i)]
        return done[-1] if done else None

    def last_clustering(self) -> Instant | None:
        done = [i for i in self.completed((Action.REPLACE_COMMIT,)) if self.is_clustering(i)]
        return done[-1] if done else None

    def last_clean(self) -> Instant | None:
        return self.latest_completed((Action.CLEAN,))

    def completed_after(
        self, after: Instant | None, actions: Iterable[Action] | None = None
    ) -> list[Instant]:
        """Completed instants requested after `after` (all of them when it is None)."""
        floor = after.requested_time if after else ""
        return [i for i in self.completed(actions) if i.requested_time > floor]

    # Instant contents --------------------------------------------------------------------

    def instant_path(self, instant: Instant, state: State | None = None) -> str:
        state = instant.state if state is None else state
        paths = self.files.get(instant_key(instant), {})
        if state in paths:
            return paths[state]
        layout = self.config.timeline_layout_version
        return f"{self.config.timeline_path}/{instant.with_state(state).file_name(layout)}"

    def read_instant(self, instant: Instant, state: State | None = None) -> bytes:
        return self.storage.read_bytes(self.instant_path(instant, state))

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Metadata of a completed write: JSON in layout 1, Avro (or legacy JSON) in layout 2.

        A replacecommit's is a `ReplaceCommitMetadata`, naming the file groups it replaced.
        """
        data = self.read_instant(instant, State.COMPLETED)
        if instant.action is Action.REPLACE_COMMIT:
            return ReplaceCommitMetadata.from_bytes(data)
        return CommitMetadata.from_bytes(data)

    def avro_details(self, instant: Instant, state: State) -> dict[str, Any] | None:
        """An Avro plan or metadata file, or None when the file is empty."""
        data = self.read_instant(instant, state)
        return avro_codec.decode(data) if data else None

    def compaction_plan(self, instant: Instant) -> dict[str, Any]:
        plan = self.avro_details(instant, State.REQUESTED)
        if plan is None:
            raise ValueError(f"compaction {instant.requested_time} has an empty plan")
        return plan

    def requested_replace_metadata(self, instant: Instant) -> dict[str, Any] | None:
        """The requested replace metadata (holding the clustering plan) of a replace instant."""
        if State.REQUESTED not in self.files.get(instant_key(instant), {}):
            return None
        return self.avro_details(instant, State.REQUESTED)

    def clustering_plan(self, instant: Instant) -> dict[str, Any]:
        requested = self.requested_replace_metadata(instant)
        if not requested or not requested.get("clusteringPlan"):
            raise ValueError(f"replacecommit {instant.requested_time} has no clustering plan")
        plan: dict[str, Any] = requested["clusteringPlan"]
        return plan

    def clean_metadata(self, instant: Instant) -> dict[str, Any]:
        metadata = self.avro_details(instant, State.COMPLETED)
        if metadata is None:
            raise ValueError(f"clean {instant.requested_time} has empty metadata")
        return metadata

    def latest_schema(self) -> str | None:
        """The writer schema (Avro JSON) of the latest commit that recorded one."""
        for instant in reversed(self.commits()):
            schema = self.commit_metadata(instant).extra_metadata.get("schema")
            if schema:
                return schema
        return None

    def describe(self) -> list[dict[str, Any]]:
        """Instants as plain rows for the CLI and JSON output."""
        return [
            {
                "instant": i.requested_time,
                "action": i.action.value,
                "state": i.state.name,
                "completion_time": i.completion_time,
                "requested_as": self.origin_action(i).value,
            }
            for i in self.instants
        ]
