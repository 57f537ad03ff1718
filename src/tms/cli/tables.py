"""The operator CLI's `tms tables …`: registered tables, through a running service's API.

Readable tables by default, the API's JSON with `--json`. Errors are one line on stderr:
exit 1 when the API refuses (its message), exit 2 when the service does not answer. The
operations group lives in `tms.cli.operations`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tms.api_client import Json
from tms.cli.registration import differences, refusal
from tms.cli.remote import (
    AsJson,
    ExecutorOption,
    Token,
    Url,
    connect,
    qualified,
    resolve_table,
    split_name,
)
from tms.cli.render import echo_json, print_rows
from tms.hudi.errors import HudiError
from tms.hudi.table import HudiTable
from tms.planning import MAX_TTL_DAYS

__all__ = ["tables_app"]

tables_app = typer.Typer(help="Registered tables (talks to the service).", no_args_is_help=True)

TableRef = Annotated[str, typer.Argument(help="Table id, or db.table (db defaults to 'default').")]

_TYPES = {"MERGE_ON_READ": "MOR", "COPY_ON_WRITE": "COW"}


def _table_rows(tables: list[Json]) -> list[dict[str, Any]]:
    return [
        {
            "id": t["id"],
            "table": qualified(t),
            "type": _TYPES.get(t.get("table_type") or "", t.get("table_type")),
            "queue": t["queue"],
            "priority": t["priority"],
            "state": "paused" if t["paused"] else "active",
            "last_commit": t.get("last_commit_instant"),
            "deltas": t["delta_commits_since_compaction"],
            "log_deltas": t.get("delta_commits_since_log_compaction"),
            "commits": t["commits_since_clean"],
            "mdt_deltas": t["commits_since_metadata_compaction"],
            "base_path": t["base_path"],
        }
        for t in tables
    ]


OwnerOption = Annotated[str | None, typer.Option(help="Owner label.")]
PriorityOption = Annotated[int | None, typer.Option(help="Higher runs first.")]
ActionsOption = Annotated[
    str | None,
    typer.Option(help="Actions policies may create, e.g. compaction,clean,clustering."),
]
CompactionDeltaCommitsOption = Annotated[
    int | None, typer.Option(help="Policy: compact after N delta commits (0 = never).", min=0)
]
CleanCommitsOption = Annotated[
    int | None, typer.Option(help="Policy: clean after N commits (0 = never).", min=0)
]
ClusteringCommitsOption = Annotated[
    int | None, typer.Option(help="Policy: cluster after N commits (0 = never).", min=0)
]
LogCompactionDeltaCommitsOption = Annotated[
    int | None,
    typer.Option(
        help="Policy: log-compact after N delta commits (0 = never; needs logcompaction in "
        "--actions).",
        min=0,
    ),
]
ArchivalCommitsOption = Annotated[
    int | None,
    typer.Option(
        help="Policy: archive the timeline after N writes (0 = never; default keep-max - "
        "keep-min + 1; needs archival in --actions).",
        min=0,
    ),
]
ArchivalKeepMinOption = Annotated[
    int | None,
    typer.Option(help="Policy: the archival's hoodie.keep.min.commits.", min=1, max=100_000),
]
ArchivalKeepMaxOption = Annotated[
    int | None,
    typer.Option(
        help="Policy: the archival's hoodie.keep.max.commits (above keep-min).", min=1, max=100_000
    ),
]
TtlDaysOption = Annotated[
    int | None,
    typer.Option(
        help="Policy: a partition TTL deletes the partitions whose last commit is older than N "
        "days (needs partition_ttl in --actions).",
        min=1,
        max=MAX_TTL_DAYS,
    ),
]
TtlPartitionsOption = Annotated[
    str | None,
    typer.Option(
        help="Policy: comma-separated glob patterns over the partition paths the partition TTL "
        "considers (default every partition; needs --ttl-days).",
    ),
]
TtlMaxPartitionsOption = Annotated[
    int | None,
    typer.Option(
        help="Policy: the most partitions one partition TTL deletes (default 1000; needs "
        "--ttl-days).",
        min=1,
        max=1_000_000,
    ),
]
TtlIntervalHoursOption = Annotated[
    float | None,
    typer.Option(
        help="Policy: hours between partition TTLs (default 24; 0 = never; needs --ttl-days).",
        min=0,
        max=100_000,
    ),
]
"""The options `tables add` registers with and `tables set` changes, written once."""


@tables_app.command("ls")
def tables_ls(
    db: Annotated[str | None, typer.Option(help="Only tables of this database.")] = None,
    paused: Annotated[
        bool | None, typer.Option("--paused/--active", help="Only paused / active tables.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many.", min=1)] = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """List registered tables with their counters (DELTAS: delta commits since the last
    compaction; LOG DELTAS: delta commits since the last log compaction or compaction;
    COMMITS: commits since the last clean; MDT DELTAS: metadata table delta commits since
    the last metadata compaction)."""
    with connect(url, token) as client:
        tables = client.tables(db_name=db, paused=paused, limit=limit)
    if as_json:
        echo_json(tables)
        return
    if not tables:
        typer.echo("no tables")
        return
    print_rows(
        _table_rows(tables),
        [
            "id",
            "table",
            "type",
            "queue",
            "priority",
            "state",
            "last_commit",
            "deltas",
            "log_deltas",
            "commits",
            "mdt_deltas",
            "base_path",
        ],
        [
            "id",
            "table",
            "type",
            "queue",
            "prio",
            "state",
            "last commit",
            "deltas",
            "log deltas",
            "commits",
            "mdt deltas",
            "base path",
        ],
    )


OptionsFile = Annotated[
    Path | None,
    typer.Option(
        "--storage-options",
        help="A JSON file of the table's storage options (credentials, endpoint), '-' for "
        "stdin; in a file, secrets stay out of the shell's history. Needs the admin role.",
    ),
]


def _read_options(path: Path) -> Any:
    """The options object in `path` ('-': stdin); the error names the file, never a value."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        return json.loads(text)
    except (OSError, ValueError) as exc:
        kind = "cannot be read" if isinstance(exc, OSError) else "is not JSON"
        typer.echo(f"error: --storage-options: {path} {kind}", err=True)
        raise typer.Exit(2) from None


def _name_from_storage(base_path: str) -> str:
    """`hoodie.table.name` when the table is readable from here, else the folder's name."""
    try:
        return HudiTable.open(base_path).name
    except (HudiError, OSError, ValueError):
        return Path(base_path.rstrip("/")).name


@tables_app.command("add")
def tables_add(
    base_path: Annotated[str, typer.Argument(help="The table's base path (as writers see it).")],
    name: Annotated[
        str | None,
        typer.Option(help="db.table or table. Default: hoodie.table.name in 'default'."),
    ] = None,
    owner: OwnerOption = None,
    queue: Annotated[str | None, typer.Option(help="Queue (default: 'default').")] = None,
    priority: PriorityOption = None,
    actions: ActionsOption = None,
    compaction_delta_commits: CompactionDeltaCommitsOption = None,
    clean_commits: CleanCommitsOption = None,
    clustering_commits: ClusteringCommitsOption = None,
    log_compaction_delta_commits: LogCompactionDeltaCommitsOption = None,
    archival_commits: ArchivalCommitsOption = None,
    archival_keep_min: ArchivalKeepMinOption = None,
    archival_keep_max: ArchivalKeepMaxOption = None,
    ttl_days: TtlDaysOption = None,
    ttl_partitions: TtlPartitionsOption = None,
    ttl_max_partitions: TtlMaxPartitionsOption = None,
    ttl_interval_hours: TtlIntervalHoursOption = None,
    paused: Annotated[bool, typer.Option("--paused", help="Register it paused.")] = False,
    storage_options: OptionsFile = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Register a table. Again with the same name and path: nothing changes, and settings
    given that differ from the registered ones are refused (exit 1) with the command that
    changes them (tms tables set)."""
    if name is None:
        name = _name_from_storage(base_path)
    db_name, table_name = split_name(name)
    policy = _policy(
        compaction_delta_commits=compaction_delta_commits,
        clean_commits=clean_commits,
        clustering_commits=clustering_commits,
        log_compaction_delta_commits=log_compaction_delta_commits,
        archival_commits=archival_commits,
        archival_keep_min=archival_keep_min,
        archival_keep_max=archival_keep_max,
        ttl_days=ttl_days,
        ttl_partitions=_patterns(ttl_partitions),
        ttl_max_partitions=ttl_max_partitions,
        ttl_interval_hours=ttl_interval_hours,
    )
    body: dict[str, Any] = {
        "db_name": db_name,
        "table_name": table_name,
        "base_path": base_path,
        "owner": owner,
        "queue": queue,
        "priority": priority,
        "enabled_actions": actions,
        "policy": policy or None,
        "paused": paused or None,
        "storage_options": _read_options(storage_options) if storage_options else None,
    }
    with connect(url, token) as client:
        table = client.add_table({k: v for k, v in body.items() if v is not None})
    if not table.get("created"):
        requested = {k: v for k, v in {**body, **policy}.items() if v is not None}
        requested.pop("policy", None)
        if body["storage_options"] is not None:
            requested["storage_options"] = list(body["storage_options"])
        found = differences(table, requested)
        if found:
            typer.echo(f"error: {refusal(qualified(table), table['id'], found)}", err=True)
            raise typer.Exit(1)
    if as_json:
        echo_json(table)
        return
    verb = "registered" if table.get("created") else "already registered:"
    typer.echo(f"{verb} {qualified(table)} as table {table['id']} ({_settings(table)})")


def _settings(table: Json) -> str:
    thresholds = table["thresholds"]
    kind = table.get("table_type") or "type unknown"
    return (
        f"{kind}, compaction every {thresholds['compaction_delta_commits']} delta commits, "
        f"clean every {thresholds['clean_commits']} commits{_ttl(table)}"
    )


def _ttl(table: Json) -> str:
    """The table's partition TTL as its settings line names it (nothing without one)."""
    days = table["policy"].get("ttl_days")
    if days is None:
        return ""
    hours = table["thresholds"]["ttl_interval_hours"]
    off = "" if "partition_ttl" in table["enabled_actions"] else " (partition_ttl not enabled)"
    return f", partition TTL {days} days every {hours:g} hours{off}"


@tables_app.command("set")
def tables_set(
    table: TableRef,
    owner: OwnerOption = None,
    queue: Annotated[str | None, typer.Option(help="Queue.")] = None,
    priority: PriorityOption = None,
    actions: ActionsOption = None,
    compaction_delta_commits: CompactionDeltaCommitsOption = None,
    clean_commits: CleanCommitsOption = None,
    clustering_commits: ClusteringCommitsOption = None,
    log_compaction_delta_commits: LogCompactionDeltaCommitsOption = None,
    archival_commits: ArchivalCommitsOption = None,
    archival_keep_min: ArchivalKeepMinOption = None,
    archival_keep_max: ArchivalKeepMaxOption = None,
    ttl_days: TtlDaysOption = None,
    ttl_partitions: TtlPartitionsOption = None,
    ttl_max_partitions: TtlMaxPartitionsOption = None,
    ttl_interval_hours: TtlIntervalHoursOption = None,
    executor: ExecutorOption = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Change a registered table's owner, queue, priority, actions, policy thresholds,
    archival or partition TTL settings, or executor (admin); what is not given stays as it
    is, the table's other policy overrides too."""
    changes: dict[str, Any] = {
        k: v
        for k, v in {
            "owner": owner,
            "queue": queue,
            "priority": priority,
            "enabled_actions": actions,
        }.items()
        if v is not None
    }
    policy = _policy(
        compaction_delta_commits=compaction_delta_commits,
        clean_commits=clean_commits,
        clustering_commits=clustering_commits,
        log_compaction_delta_commits=log_compaction_delta_commits,
        archival_commits=archival_commits,
        archival_keep_min=archival_keep_min,
        archival_keep_max=archival_keep_max,
        ttl_days=ttl_days,
        ttl_partitions=_patterns(ttl_partitions),
        ttl_max_partitions=ttl_max_partitions,
        ttl_interval_hours=ttl_interval_hours,
    )
    if executor is not None:
        policy["executor"] = executor
    if not changes and not policy:
        typer.echo("error: nothing to change: give at least one option (see --help)", err=True)
        raise typer.Exit(2)
    with connect(url, token) as client:
        found = resolve_table(client, table)
        if policy:
            changes["policy"] = {**found["policy"], **policy}
        changed = client.update_table(found["id"], changes)
    if as_json:
        echo_json(changed)
        return
    typer.echo(
        f"{qualified(changed)} (table {changed['id']}) changed: {_settings(changed)}, "
        f"queue {changed['queue']}, priority {changed['priority']}, "
        f"actions {','.join(changed['enabled_actions']) or 'none'}"
    )


@tables_app.command("rm")
def tables_rm(
    table: TableRef,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Forget a table and its commits, operations and attempts (storage is not touched)."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        name = f"{qualified(found)} (table {found['id']})"
        if not yes:
            typer.confirm(f"Forget {name} with its commits, operations and attempts?", abort=True)
        client.delete_table(found["id"])
    typer.echo(f"removed {name}")


def _set_paused(
    table: str, paused: bool, url: str | None, token: str | None, as_json: bool
) -> None:
    with connect(url, token) as client:
        found = resolve_table(client, table)
        changed = client.update_table(found["id"], {"paused": paused})
    if as_json:
        echo_json(changed)
        return
    state = "paused: no new operations by policy" if paused else "resumed"
    typer.echo(f"{qualified(changed)} (table {changed['id']}) {state}")


@tables_app.command("pause")
def tables_pause(
    table: TableRef, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """Stop policies from creating operations for a table (submitted ones still run)."""
    _set_paused(table, True, url, token, as_json)


@tables_app.command("resume")
def tables_resume(
    table: TableRef, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """Let policies create operations for a paused table again."""
    _set_paused(table, False, url, token, as_json)


@tables_app.command("storage-options")
def tables_storage_options(
    table: TableRef,
    options_file: Annotated[
        Path,
        typer.Argument(
            help="A JSON file of all the table's storage options ('-' for stdin); {} removes them."
        ),
    ],
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Replace a table's storage options (admin). Their values are never shown again."""
    options = _read_options(options_file)
    with connect(url, token) as client:
        found = resolve_table(client, table)
        changed = client.update_table(found["id"], {"storage_options": options})
    if as_json:
        echo_json(changed)
        return
    names = ", ".join(changed["storage_options"]) or "none"
    typer.echo(f"{qualified(changed)} (table {changed['id']}) storage options: {names}")


def _policy(**given: Any) -> dict[str, Any]:
    """The policy settings given on the command line, by their policy keys."""
    return {key: value for key, value in given.items() if value is not None}


def _patterns(value: str | None) -> list[str] | None:
    """`--ttl-partitions`'s glob patterns, in the order given, each once."""
    if value is None:
        return None
    patterns = list(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))
    if not patterns:
        typer.echo("error: --ttl-partitions: give one or more glob patterns", err=True)
        raise typer.Exit(2)
    return patterns
