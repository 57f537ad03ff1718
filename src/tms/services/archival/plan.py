"""What Hudi's archiver would move out of the active timeline now: a dry run in tms's own code.

Hudi 1.x's write client archives (`archive()`) with the archiver of the table's timeline layout
(`TimelineArchivers`): `TimelineArchiverV2` on layout 2 (table versions 8 and 9, into the LSM
history under `.hoodie/timeline/history/`), `TimelineArchiverV1` on layout 1 (version 6, into
log files under `.hoodie/archived/`). Both archive completed commits (commit, delta commit,
replacecommit; commit and replacecommit on copy-on-write), oldest first, only once there are
more than `hoodie.keep.max.commits`, down to `hoodie.keep.min.commits`, and never from the
earliest of:

- the latest completed commit before the earliest pending write (any action that writes
  files), or that pending write when no commit precedes it;
- on merge-on-read, where the compaction trigger counts delta commits (Hudi's default
  `NUM_COMMITS`): the last `hoodie.compact.inline.max.delta.commits` delta commits since the
  latest compaction, or that compaction when fewer followed it;
- the first replacecommit or clustering (any state) at or after the earliest instant the last
  clean's plan retained (the earliest savepoint it recorded where a replacecommit lies between
  the two; the clean's own time when it retained none), since the files it replaced may still
  be on storage; the first one when nothing was cleaned;
- with a metadata table, its latest compaction: layout 2 keeps the commits completed after it,
  layout 1 the instants requested after it; neither archives anything before the metadata
  table's first compaction;
- the first savepoint.

`hoodie.keep.min.commits` is raised, and max with it, to what the cleaner's retention needs
(`ArchivalUtils`): the completed commits after the earliest commit the cleaner's policy
retains, plus two. Cleans and rollbacks go with the commits: layout 2 archives those requested
before the last commit it archives; layout 1 archives, per action, the oldest down to min once
there are more than max.

The table's configs are read from `hoodie.properties` (the write client that archives is given
those, `tms.services.apache_hudi.clients.write_configs`), else Hudi's defaults; an operation
may set keep.min and keep.max itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tms.hudi.metadata.partitions import FILES
from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.properties import TableConfig
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import (
    WRITE_ACTIONS,
    Action,
    Instant,
    State,
    format_instant_time,
    parse_instant_time,
)
from tms.hudi.timeline.timeline import Timeline
from tms.planning import BadJobInput

__all__ = [
    "DEFAULT_KEEP_MAX",
    "DEFAULT_KEEP_MIN",
    "KEEP_MAX_KEY",
    "KEEP_MIN_KEY",
    "ArchivalPlan",
    "Keep",
    "Limit",
    "TableFacts",
    "archival_of",
    "configured_keep",
    "plan_archival",
]

KEEP_MIN_KEY = "hoodie.keep.min.commits"
KEEP_MAX_KEY = "hoodie.keep.max.commits"
DEFAULT_KEEP_MIN = 20
DEFAULT_KEEP_MAX = 30
_CLEANER_POLICY = ("hoodie.clean.policy", "hoodie.cleaner.policy")
_CLEANER_COMMITS = ("hoodie.clean.commits.retained", "hoodie.cleaner.commits.retained")
_CLEANER_HOURS = ("hoodie.clean.hours.retained", "hoodie.cleaner.hours.retained")
_COMPACTION_TRIGGER = ("hoodie.compact.inline.trigger.strategy",)
_COMPACTION_DELTAS = ("hoodie.compact.inline.max.delta.commits",)
_COUNTED_TRIGGERS = ("NUM_COMMITS", "NUM_AND_TIME")
_KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
_KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
_KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
_SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"
_CLEANER_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)
_REPLACING = (Action.REPLACE_COMMIT, Action.CLUSTERING)

KEEP_MAX = "keep_max"
KEEP_MIN = "keep_min"
NOTHING = "keep_max"
"""The rule named when the active timeline holds no more commits than keep.max."""


@dataclass(frozen=True)
class Keep:
    """Completed commits Hudi keeps: it archives once there are more than `max`, down to
    `min`."""

    min: int
    max: int


@dataclass(frozen=True)
class Limit:
    """A rule that keeps commits on the active timeline: those requested at or after
    `instant`."""

    rule: str
    instant: str
    reason: str


@dataclass(frozen=True)
class TableFacts:
    """What Hudi's archiver reads of a table beside its timeline: its configs (the table's,
    else Hudi's defaults) and its metadata table's latest compaction."""

    layout_version: int
    merge_on_read: bool
    cleaner_policy: str = _KEEP_LATEST_COMMITS
    cleaner_commits: int = 10
    cleaner_hours: int = 24
    compaction_trigger: str = "NUM_COMMITS"
    compaction_deltas: int = 5
    metadata_table: bool = False
    metadata_compaction: str | None = None
    """The requested time of the metadata table's latest completed compaction."""


@dataclass(frozen=True)
class ArchivalPlan:
    """What an archival would archive now, and why it stops where it does."""

    configured: Keep
    """keep.min and keep.max as asked (the operation's, else the table's, else Hudi's)."""
    keep: Keep
    """As Hudi applies them: raised to what the cleaner's retention needs."""
    completed_commits: int
    """Completed commits on the active timeline, the count keep.max is compared with."""
    instants: tuple[Instant, ...]
    """The instants it archives (commits, cleans, rollbacks), oldest first."""
    earliest_kept: str | None
    """The earliest completed commit left on the active timeline."""
    stopped_by: str
    """The rule it stops at: keep_max (nothing due), keep_min, pending, compaction,
    clustering, metadata_compaction, savepoint."""
    reason: str
    limits: tuple[Limit, ...] = ()
    """Every rule that keeps commits, earliest first."""

    @property
    def due(self) -> bool:
        return bool(self.instants)

    @property
    def commits(self) -> list[Instant]:
        return [i for i in self.instants if i.action not in (Action.CLEAN, Action.ROLLBACK)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "keep_min": self.keep.min,
            "keep_max": self.keep.max,
            "configured_keep_min": self.configured.min,
            "configured_keep_max": self.configured.max,
            "completed_commits": self.completed_commits,
            "instants": [_row(i) for i in self.instants],
            "commits_archived": len(self.commits),
            "earliest_kept": self.earliest_kept,
            "stopped_by": self.stopped_by,
            "reason": self.reason,
            "limits": [
                {"rule": x.rule, "instant": x.instant, "reason": x.reason} for x in self.limits
            ],
        }


def _row(instant: Instant) -> dict[str, Any]:
    return {
        "instant": instant.requested_time,
        "action": instant.action.value,
        "completion_time": instant.completion_time,
    }


def plan_archival(
    table: HudiTable, *, keep_min: int | None = None, keep_max: int | None = None
) -> ArchivalPlan:
    """What Hudi's archiver would archive on `table` now, with keep.min and keep.max as the
    operation gives them (None: the table's, else Hudi's 20 and 30). Reads only."""
    configured = configured_keep(table.config, keep_min, keep_max)
    return archival_of(table.timeline(), table_facts(table), configured)


def configured_keep(config: TableConfig, keep_min: int | None, keep_max: int | None) -> Keep:
    """keep.min and keep.max: the operation's, else the table's, else Hudi's defaults;
    `BadJobInput` naming the parameter when max is not above min (Hudi refuses those)."""
    low = keep_min if keep_min is not None else _int(config, (KEEP_MIN_KEY,), DEFAULT_KEEP_MIN)
    high = keep_max if keep_max is not None else _int(config, (KEEP_MAX_KEY,), DEFAULT_KEEP_MAX)
    if high <= low:
        raise BadJobInput(
            f"extra_params {KEEP_MAX}: {KEEP_MAX_KEY} must be greater than {KEEP_MIN_KEY} "
            f"(got {high} and {low})"
        )
    return Keep(low, high)


def table_facts(table: HudiTable) -> TableFacts:
    """The configs and metadata table state the rules read, from `table`."""
    config = table.config
    metadata = FILES in config.metadata_partitions
    return TableFacts(
        layout_version=config.timeline_layout_version,
        merge_on_read=config.is_merge_on_read,
        cleaner_policy=_text(config, _CLEANER_POLICY, _KEEP_LATEST_COMMITS).upper(),
        cleaner_commits=_int(config, _CLEANER_COMMITS, 10),
        cleaner_hours=_int(config, _CLEANER_HOURS, 24),
        compaction_trigger=_text(config, _COMPACTION_TRIGGER, "NUM_COMMITS").upper(),
        compaction_deltas=_int(config, _COMPACTION_DELTAS, 5),
        metadata_table=metadata,
        metadata_compaction=_metadata_compaction(table) if metadata else None,
    )


def _text(config: TableConfig, keys: tuple[str, ...], default: str) -> str:
    return next((config.get(k).strip() for k in keys if config.get(k).strip()), default)


def _int(config: TableConfig, keys: tuple[str, ...], default: int) -> int:
    text = _text(config, keys, str(default))
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"hoodie.properties {keys[0]}={text!r} is not a number") from None


def _metadata_compaction(table: HudiTable) -> str | None:
    """The requested time of the metadata table's latest completed compaction (a commit or
    replacecommit on its timeline); None before its first, or without one on storage."""
    storage = metadata_storage(table.storage)
    try:
        config = TableConfig.load(storage)
    except FileNotFoundError:
        return None
    done = Timeline.load(storage, config).completed((Action.COMMIT, Action.REPLACE_COMMIT))
    return done[-1].requested_time if done else None


def archival_of(timeline: Timeline, facts: TableFacts, configured: Keep) -> ArchivalPlan:
    """The dry run on a timeline read once, by the rules of the table's layout."""
    commits = _completed_commits(timeline, facts)
    keep = _keep(timeline, commits, facts, configured)
    limits = _limits(timeline, commits, facts)
    nothing = _nothing_due(commits, facts, keep)
    archived: list[Instant] = []
    if nothing is None:
        bound = limits[0] if limits else None
        eligible = [c for c in commits if bound is None or c.requested_time < bound.instant]
        archived = eligible[: len(commits) - keep.min]
        rule, reason = _stop(eligible, archived, bound, keep)
    else:
        rule, reason = nothing
    others = _cleans_and_rollbacks(timeline, facts, keep, archived)
    return ArchivalPlan(
        configured=configured,
        keep=keep,
        completed_commits=len(commits),
        instants=tuple(sorted(archived + others, key=lambda i: (i.requested_time, i.action))),
        earliest_kept=commits[len(archived)].requested_time
        if len(commits) > len(archived)
        else None,
        stopped_by=rule,
        reason=reason,
        limits=tuple(limits),
    )


def _completed_commits(timeline: Timeline, facts: TableFacts) -> list[Instant]:
    """The commits keep.min and keep.max count (`HoodieTable.getCompletedCommitsTimeline`)."""
    actions = [Action.COMMIT, Action.REPLACE_COMMIT]
    if facts.merge_on_read:
        actions.append(Action.DELTA_COMMIT)
    return timeline.completed(actions)


def _nothing_due(commits: list[Instant], facts: TableFacts, keep: Keep) -> tuple[str, str] | None:
    """Why no commit is archived whatever the limits; None when some may be."""
    if len(commits) <= keep.max:
        return NOTHING, (
            f"{len(commits)} completed commits on the active timeline, not more than "
            f"{KEEP_MAX_KEY}={keep.max}: Hudi archives nothing yet"
        )
    if facts.metadata_table and facts.metadata_compaction is None:
        return "metadata_compaction", (
            "the metadata table has no completed compaction: Hudi archives nothing until it "
            "has one (Hudi's writers compact it, or tms's metadata-compaction)"
        )
    return None


def _stop(
    eligible: list[Instant], archived: list[Instant], bound: Limit | None, keep: Keep
) -> tuple[str, str]:
    """The rule the archived commits stop at, and why."""
    if bound is None or len(eligible) > len(archived):
        return KEEP_MIN, f"Hudi keeps the latest {keep.min} completed commits ({KEEP_MIN_KEY})"
    return bound.rule, bound.reason


def _keep(timeline: Timeline, commits: list[Instant], facts: TableFacts, configured: Keep) -> Keep:
    """keep.min and keep.max as Hudi applies them (`ArchivalUtils.getMinAndMaxInstantsToKeep`):
    never fewer commits than the cleaner's earliest retained commit needs."""
    earliest = _cleaner_retains_from(timeline, commits, facts)
    if earliest is None:
        return configured
    needed = sum(1 for c in commits if c.requested_time > earliest) + 2
    if configured.min >= needed:
        return configured
    return Keep(needed, needed + configured.max - configured.min)


def _cleaner_retains_from(
    timeline: Timeline, commits: list[Instant], facts: TableFacts
) -> str | None:
    """The earliest commit the cleaner's policy retains (`CleanerUtils.getEarliestCommitToRetain`
    over the commits timeline); None when it retains every one."""
    writes = [i for i in timeline.instants if i.action in _CLEANER_WRITES and not i.is_aborted]
    completed = [i for i in writes if i.is_completed]
    if facts.cleaner_policy == _KEEP_LATEST_COMMITS:
        if len(completed) <= facts.cleaner_commits:
            return None
        nth = completed[len(completed) - facts.cleaner_commits].requested_time
        pending = next((i.requested_time for i in writes if i.is_pending), None)
        if pending is None or nth <= pending:
            return nth
        before = [c.requested_time for c in completed if c.requested_time < pending]
        return before[-1] if before else None
    if facts.cleaner_policy == _KEEP_LATEST_BY_HOURS:
        latest = commits[-1].requested_time if commits else format_instant_time(datetime.now())
        since = _hours_before(latest, facts.cleaner_hours)
        return next((c.requested_time for c in completed if c.requested_time >= since), None)
    return None


def _hours_before(instant_time: str, hours: int) -> str:
    """The instant time `hours` before `instant_time`, in the same clock."""
    earlier = parse_instant_time(instant_time[:17]) - timedelta(hours=hours)
    return format_instant_time(earlier)


def _limits(timeline: Timeline, commits: list[Instant], facts: TableFacts) -> list[Limit]:
    """Every rule that keeps commits, earliest first."""
    found = [
        _pending_limit(timeline, commits),
        _compaction_limit(timeline, facts),
        _clustering_limit(timeline, facts),
        _metadata_limit(commits, facts),
        _savepoint_limit(timeline),
    ]
    return sorted((x for x in found if x is not None), key=lambda x: x.instant)


def _pending_limit(timeline: Timeline, commits: list[Instant]) -> Limit | None:
    pending = next(
        (i for i in timeline.instants if i.action in WRITE_ACTIONS and i.is_pending), None
    )
    if pending is None:
        return None
    before = [c for c in commits if c.requested_time < pending.requested_time]
    kept = before[-1].requested_time if before else pending.requested_time
    return Limit(
        "pending",
        kept,
        f"{pending.action.value} {pending.requested_time} is pending ({pending.state.name}): "
        f"Hudi keeps the latest completed commit before it ({kept}) and everything after",
    )


def _compaction_limit(timeline: Timeline, facts: TableFacts) -> Limit | None:
    """The delta commits a compaction trigger counting them needs (`CompactionUtils`)."""
    if not facts.merge_on_read or facts.compaction_trigger not in _COUNTED_TRIGGERS:
        return None
    compactions = timeline.completed((Action.COMMIT,))
    deltas = [i for i in timeline.instants if i.action is Action.DELTA_COMMIT and not i.is_aborted]
    if compactions:
        anchor = compactions[-1]
        deltas = [d for d in deltas if d.requested_time > anchor.requested_time]
        since = f"since the latest compaction {anchor.requested_time}"
    elif deltas:
        anchor = deltas[0]
        since = "(the table has no compaction)"
    else:
        return None
    wanted = facts.compaction_deltas
    kept = anchor if len(deltas) < wanted else deltas[len(deltas) - wanted]
    return Limit(
        "compaction",
        kept.requested_time,
        f"merge-on-read: Hudi keeps the delta commits a compaction is scheduled from, the "
        f"last {wanted} {since} (hoodie.compact.inline.max.delta.commits={wanted}), from "
        f"{kept.requested_time}",
    )


def _clustering_limit(timeline: Timeline, facts: TableFacts) -> Limit | None:
    """A replacecommit or clustering whose replaced files the last clean may not have
    removed (`ClusteringUtils.getEarliestInstantToRetainForClustering`)."""
    replacing = [i for i in timeline.instants if i.action in _REPLACING and not i.is_aborted]
    if not replacing:
        return None
    clean = timeline.last_clean()
    if clean is None:
        lower, why = "", "no clean has run"
    else:
        lower, why = _clean_retained(timeline, clean, facts)
    first = next((i for i in replacing if i.requested_time >= lower), None)
    if first is None:
        return None
    return Limit(
        "clustering",
        first.requested_time,
        f"{first.action.value} {first.requested_time} replaced file groups the cleaner may not "
        f"have removed yet ({why}): Hudi keeps it and everything after",
    )


def _clean_retained(timeline: Timeline, clean: Instant, facts: TableFacts) -> tuple[str, str]:
    """Where the last clean's plan retained from, as the clustering rule reads it."""
    plan = timeline.avro_details(clean, State.REQUESTED) if _has_plan(timeline, clean) else None
    plan = plan or {}
    retained = str((plan.get("earliestInstantToRetain") or {}).get("timestamp") or "")
    saved = str((plan.get("extraMetadata") or {}).get(_SAVEPOINTED_TIMESTAMPS) or "")
    earliest_saved = min((s for s in saved.split(",") if s), default="")
    if facts.cleaner_policy != _KEEP_LATEST_FILE_VERSIONS and retained and earliest_saved:
        between = [
            i
            for i in timeline.completed((Action.REPLACE_COMMIT,))
            if earliest_saved <= i.requested_time <= retained
        ]
        if retained > earliest_saved and between:
            return earliest_saved, f"the last clean kept savepoint {earliest_saved}'s files"
    if retained:
        return retained, f"the last clean {clean.requested_time} retained from {retained}"
    return clean.requested_time, f"the last clean {clean.requested_time} retained no commit"


def _has_plan(timeline: Timeline, clean: Instant) -> bool:
    return State.REQUESTED in timeline.files.get((clean.requested_time, Action.CLEAN), {})


def _metadata_limit(commits: list[Instant], facts: TableFacts) -> Limit | None:
    """The metadata table's latest compaction: layout 2 keeps the first commit completed
    after it and everything after; layout 1 the instants requested after it."""
    compaction = facts.metadata_compaction
    if not facts.metadata_table or compaction is None:
        return None
    if facts.layout_version < 2:
        return Limit(
            "metadata_compaction",
            compaction,
            f"the metadata table's latest compaction is {compaction}: Hudi archives only "
            "instants requested before it",
        )
    after = (
        c
        for c in commits
        if (c.completion_time or c.requested_time) > compaction and c.requested_time != compaction
    )
    first = next(after, None)
    if first is None:
        return None
    return Limit(
        "metadata_compaction",
        first.requested_time,
        f"the metadata table's latest compaction is {compaction}: Hudi keeps the commits "
        f"completed after it, from {first.requested_time}",
    )


def _savepoint_limit(timeline: Timeline) -> Limit | None:
    savepoints = timeline.completed((Action.SAVEPOINT,))
    if not savepoints:
        return None
    first = savepoints[0].requested_time
    return Limit(
        "savepoint",
        first,
        f"savepoint {first}: Hudi archives nothing from the first savepoint on",
    )


def _cleans_and_rollbacks(
    timeline: Timeline,
    facts: TableFacts,
    keep: Keep,
    archived: list[Instant],
) -> list[Instant]:
    """The completed cleans and rollbacks archived with the commits."""
    if facts.layout_version >= 2:
        if not archived:
            return []
        last = archived[-1].requested_time
        return [
            i
            for i in timeline.completed((Action.CLEAN, Action.ROLLBACK))
            if i.requested_time < last
        ]
    chosen: list[Instant] = []
    for action in (Action.CLEAN, Action.ROLLBACK):
        done = timeline.completed((action,))
        if len(done) > keep.max:
            chosen += done[: len(done) - keep.min]
    if facts.metadata_table:
        compaction = facts.metadata_compaction
        chosen = [i for i in chosen if compaction is not None and i.requested_time < compaction]
    return chosen
