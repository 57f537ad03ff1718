"""Table-layer commands: read a Hudi table's timeline and files, run a table service on
Spark. They work on storage directly and need no service."""

from __future__ import annotations

import enum
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer

from tms.cli.render import cell, print_rows
from tms.cli.run_output import RunLog, StagePrinter, default_log_file
from tms.cli.service_names import ServiceName, service_names
from tms.config import load_settings
from tms.engines.hudi_bundle import bundle_fetcher
from tms.executor_choice import AUTO, HUDI, NATIVE
from tms.hudi.actions import INDEXING, PARTITION_TTL
from tms.hudi.errors import HudiError
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import DATABASE_NAME
from tms.hudi.table import HudiTable
from tms.jobs.client import JobSpec
from tms.jobs.local import LocalSpark, run_here
from tms.jobs.runner import Report
from tms.planning import (
    DEFAULT_LOG_BLOCKS_THRESHOLD,
    MAX_TTL_DAYS,
    BadJobInput,
    index_partitions,
    planning_arguments,
    ttl_patterns,
)

__all__ = ["files", "metadata", "run", "timeline"]

BasePath = Annotated[str, typer.Option("--base-path", help="Base path of the Hudi table.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _open(base_path: str) -> HudiTable:
    try:
        return HudiTable.open(base_path)
    except HudiError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _refused(exc: HudiError) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(2)


def timeline(
    base_path: BasePath,
    as_json: AsJson = False,
    archived: Annotated[
        bool, typer.Option("--archived", help="Also list the archived instants (layout 2).")
    ] = False,
) -> None:
    """Print the timeline: every instant with action, state and times."""
    table = _open(base_path)
    loaded = table.timeline()
    rows = loaded.describe()
    history: list[dict[str, object]] = []
    if archived:
        try:
            history = [{**row, "state": "ARCHIVED"} for row in loaded.archived.describe()]
        except HudiError as exc:
            raise _refused(exc) from exc
    if as_json:
        document: dict[str, object] = {
            "table": table.name,
            "base_path": base_path,
            "table_version": table.config.table_version,
            "instants": rows,
        }
        if archived:
            document["archived"] = history
        typer.echo(json.dumps(document, indent=2))
        return
    print_rows(history + rows, ["instant", "action", "state", "completion_time", "requested_as"])


def files(base_path: BasePath, as_json: AsJson = False) -> None:
    """Print file groups with their latest file slices."""
    table = _open(base_path)
    try:
        view = table.file_system_view()
    except HudiError as exc:
        raise _refused(exc) from exc
    rows = view.describe()
    if as_json:
        typer.echo(
            json.dumps({"table": table.name, "base_path": base_path, "file_slices": rows}, indent=2)
        )
        return
    print_rows(rows, ["partition", "file_id", "base_instant", "base_file", "log_files"])


def metadata(base_path: BasePath, as_json: AsJson = False) -> None:
    """Print the metadata table: its partitions with their file groups, and the file count
    of each data partition its `files` partition lists (read only)."""
    table = _open(base_path)
    try:
        reader = MetadataTableReader.open(table.storage, table.config)
        partitions = [
            {"partition": p, "file_groups": reader.file_group_count(p)} for p in reader.partitions
        ]
        listed = reader.all_files() if "files" in reader.partitions else {}
    except HudiError as exc:
        raise _refused(exc) from exc
    data = [{"partition": p, "files": len(names)} for p, names in sorted(listed.items())]
    if as_json:
        document = {"table": table.name, "metadata_partitions": partitions, "files": data}
        typer.echo(json.dumps(document, indent=2))
        return
    print_rows(partitions, ["partition", "file_groups"])
    typer.echo("")
    print_rows(data, ["partition", "files"])


RESULT_NOTES = {
    "duration_seconds": "executing the plan",
    "wall_seconds": "the whole command: opening the table, planning, starting Spark, executing",
    "log_file": "Spark's output and the libraries' logs",
    "executed_by": "native: tms's own code; hudi: Apache Hudi's table-service code",
}
"""What `tms run` says next to a figure of its result whose scope is not plain."""


class Executor(enum.StrEnum):
    """The choices of `tms.executor_choice`, the service's."""

    auto = AUTO
    native = NATIVE
    hudi = HUDI


def _hudi_bundle() -> list[str]:
    """Hudi's Spark bundle for a run Hudi's code serves (`TMS_HUDI_JARS`, else the cached
    bundle, else fetched into the cache as the service fetches it); [] when it cannot be
    had. The settings are read only then: a run tms's own code serves needs none of them."""
    settings = load_settings()
    return bundle_fetcher(settings).jars(settings.hudi_jars, wait=None)


# Typer reads the annotations at run time and gets the enum with its members, one per
# table service; mypy, which cannot see members made at run time, checks `ServiceName`.
if TYPE_CHECKING:
    Service: TypeAlias = ServiceName
else:
    Service = service_names("Service")  # no RFC-43 words: `tms run` takes no `index`


def _index_options(
    service: Service, instant: str | None, partitions: str, drop: bool
) -> tuple[str, ...]:
    """The partitions `tms run indexing` builds or drops; exit 2 when they are missing,
    unknown, or given to another service."""
    if service.action != INDEXING:
        if (partitions and service.action != PARTITION_TTL) or drop:
            typer.echo(
                "error: --partitions and --drop are options of indexing only (--partitions "
                "also of partition_ttl)",
                err=True,
            )
            raise typer.Exit(2)
        return ()
    if drop and instant is not None:
        typer.echo("error: --drop runs no plan: give --partitions, not --instant", err=True)
        raise typer.Exit(2)
    if not partitions:
        if instant is None:
            typer.echo(
                "error: indexing needs --partitions: the metadata partitions to build or drop",
                err=True,
            )
            raise typer.Exit(2)
        return ()
    try:
        return index_partitions(partitions)
    except BadJobInput as exc:
        typer.echo(
            f"error: --partitions: {str(exc).removeprefix('extra_params partitions: ')}", err=True
        )
        raise typer.Exit(2) from exc


def _ttl_options(
    service: Service, instant: str | None, ttl_days: int | None, partitions: str
) -> list[str]:
    """The glob patterns `tms run partition_ttl` selects partitions by; exit 2 when
    --ttl-days is missing (no --instant) or given to another service."""
    if service.action != PARTITION_TTL:
        if ttl_days is not None:
            typer.echo("error: --ttl-days is an option of partition_ttl only", err=True)
            raise typer.Exit(2)
        return []
    if ttl_days is None and instant is None:
        typer.echo(
            "error: partition_ttl needs --ttl-days: partitions whose last commit is older "
            "than this many days are deleted",
            err=True,
        )
        raise typer.Exit(2)
    try:
        return list(ttl_patterns(partitions))
    except BadJobInput as exc:
        message = str(exc).removeprefix("extra_params ttl_partitions: ")
        typer.echo(f"error: --partitions: {message}", err=True)
        raise typer.Exit(2) from exc


def run(
    service: Annotated[Service, typer.Argument(help="The table service to run.")],
    base_path: BasePath,
    instant: Annotated[
        str | None, typer.Option(help="Execute this pending plan; without it, schedule one.")
    ] = None,
    master: Annotated[str, typer.Option(help="Spark master.")] = "local[*]",
    parallelism: Annotated[int | None, typer.Option(help="Spark tasks at most at once.")] = None,
    strategy: Annotated[
        str, typer.Option(help="Compaction plan strategy: all | log-size.")
    ] = "all",
    target_file_size: Annotated[
        int, typer.Option(help="Clustering: target size of a file group, in bytes.")
    ] = 128 * 1024 * 1024,
    small_file_limit: Annotated[
        int, typer.Option(help="Clustering: file groups below this size are clustered.")
    ] = 100 * 1024 * 1024,
    sort_columns: Annotated[
        str, typer.Option(help="Clustering: comma-separated columns to sort rows by.")
    ] = "",
    policy: Annotated[
        str, typer.Option(help="Clean: KEEP_LATEST_COMMITS | KEEP_LATEST_FILE_VERSIONS.")
    ] = "KEEP_LATEST_COMMITS",
    retain: Annotated[int, typer.Option(help="Clean: commits or file versions to keep.")] = 10,
    log_blocks_threshold: Annotated[
        int,
        typer.Option(
            min=1,
            help="Log compaction: file slices with at least this many log blocks are planned "
            "(Hudi's hoodie.log.compaction.blocks.threshold).",
        ),
    ] = DEFAULT_LOG_BLOCKS_THRESHOLD,
    partitions: Annotated[
        str,
        typer.Option(
            help="Indexing: comma-separated metadata partitions to build (files, column_stats, "
            "partition_stats, record_index); required unless --instant runs a pending plan. "
            "Partition TTL: comma-separated glob patterns over partition paths (* matches "
            "any characters, / included) choosing the partitions considered; default all."
        ),
    ] = "",
    drop: Annotated[
        bool,
        typer.Option(
            "--drop",
            help="Indexing: drop --partitions from the metadata table instead (no plan, no "
            "Spark); dropping files drops the whole metadata table.",
        ),
    ] = False,
    keep_min: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Archival: completed commits kept (hoodie.keep.min.commits; default the "
            "table's, else Hudi's 20).",
        ),
    ] = None,
    keep_max: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Archival: archive once there are more completed commits than this "
            "(hoodie.keep.max.commits; default the table's, else Hudi's 30).",
        ),
    ] = None,
    ttl_days: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_TTL_DAYS,
            help="Partition TTL: partitions whose last commit is older than this many days "
            "are deleted (hoodie.partition.ttl.strategy.days.retain); required unless "
            "--instant runs a pending plan.",
        ),
    ] = None,
    heartbeat_interval: Annotated[
        float, typer.Option(help="Seconds between heartbeats of the running instant.")
    ] = 60.0,
    log_file: Annotated[
        Path | None,
        typer.Option(
            help="Where Spark's output (its log4j lines, the JVM's stderr) and the libraries' "
            "logs go; default .tms/logs/run/<service>-<UTC time>.log.",
        ),
    ] = None,
    executor: Annotated[
        Executor,
        typer.Option(
            case_sensitive=False,
            help="Who plans and runs the plan: auto (tms's own code where it serves the table, "
            "else Apache Hudi's table-service code, with Hudi's Spark bundle), native (tms's "
            "own code; a table it declines is refused), hudi (Hudi's code).",
        ),
    ] = Executor.auto,
    as_json: AsJson = False,
) -> None:
    """Schedule (unless --instant is given) and execute a table service on Spark.

    Prints each stage (planning, starting Spark, compacting, committing, ...) and the file
    groups done out of planned as they change (on stderr with --json); Spark's output goes
    to --log-file, named when Spark starts and in the result. duration_seconds covers
    executing the plan, wall_seconds the whole command. A pending plan of the service is
    run rather than planning a new one. executed_by says whose code ran (native or hudi),
    native_declined why tms's own code declined the table (--executor auto).

    indexing: builds the metadata partitions --partitions names (drops them with --drop).
    archival: Hudi's archiver moves old completed instants out of the active timeline (no
    plan; Hudi's Spark bundle needed), if the dry run finds any due.
    partition_ttl: deletes the partitions whose last commit is older than --ttl-days days
    (among those --partitions selects): tms plans, Hudi's code deletes."""
    started = time.monotonic()
    index_partitions = _index_options(service, instant, partitions, drop)
    ttl_partitions = _ttl_options(service, instant, ttl_days, partitions)
    table = _open(base_path)
    log_path = (log_file or default_log_file(service.value)).absolute()
    planning = {
        "strategy": strategy,
        "target_file_size": target_file_size,
        "small_file_limit": small_file_limit,
        "sort_columns": [c.strip() for c in sort_columns.split(",") if c.strip()],
        "policy": policy,
        "retained": retain,
        "log_blocks_threshold": log_blocks_threshold,
        "partitions": list(index_partitions),
        "drop": drop,
        "keep_min": keep_min,
        "keep_max": keep_max,
        "ttl_days": ttl_days,
        "ttl_partitions": ttl_partitions,
    }
    spec = JobSpec(
        attempt_id=0,
        operation_id=0,
        action=service.value,
        instant=instant,
        base_path=base_path,
        db_name=table.config.get(DATABASE_NAME),
        table_name=table.name,
        parallelism=parallelism,
        extra_params=_planning_of(service.value, planning),
        heartbeat_interval_seconds=heartbeat_interval,
        executor=executor.value,
    )
    printer = StagePrinter(
        service.value,
        lambda line: typer.echo(line, err=as_json),  # stdout stays the result's with --json
        started,
        notes={"starting Spark": f"{master}; its output goes to {log_path}"},
    )
    with RunLog(log_path), printer:
        report = run_here(spec, LocalSpark(master, log_path, _hudi_bundle), printer.progress)
    _print_report(service.value, report, started, log_path, as_json)


def _planning_of(action: str, given: dict[str, Any]) -> dict[str, Any]:
    """The planning parameters of `action` the command line gives (an empty list: none)."""
    wanted = planning_arguments(action)
    return {k: v for k, v in given.items() if k in wanted and v != [] and v is not None}


def _print_report(
    service: str, report: Report, started: float, log_path: Path, as_json: bool
) -> None:
    """The run's outcome as the job reported it; exit 2 when the table or the input was
    refused, 1 when the work failed (its traceback is in the log file)."""
    figures = dict(report.figures)
    decided = {
        "executed_by": figures.pop("executor", None),
        "native_declined": figures.pop("native_declined", None),
    }
    if report.outcome != "SUCCEEDED":
        error = report.error or report.outcome.lower()
        declined = decided["native_declined"]
        if declined and declined not in error:
            error = f"{error} (native declined: {declined})"
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1 if report.retryable else 2)
    if "dropped" in figures:
        dropped = figures["dropped"].split(",")
        outcome = {"service": service, "state": "DROPPED", "partitions": dropped, **decided}
        _print_outcome(outcome, f"{service}: dropped {', '.join(dropped)}", as_json)
        return
    if figures.get("nothing_to_do"):
        reason = figures.get("reason")
        outcome = {"service": service, "state": "NOTHING_TO_DO", **decided}
        if reason:
            outcome["reason"] = reason
        line = (
            f"{service}: nothing to do: {reason}" if reason else f"{service}: nothing to schedule"
        )
        _print_outcome(outcome, line, as_json)
        return
    adopted = figures.pop("adopted_pending_plan", False)
    result: dict[str, Any] = {
        **figures,
        **decided,
        "adopted_pending_plan": adopted,
        "wall_seconds": round(time.monotonic() - started, 3),
        "log_file": str(log_path),
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    _print_figures(result)


def _print_outcome(outcome: dict[str, Any], line: str, as_json: bool) -> None:
    """A run with no plan executed: its JSON, else `line` and who decided so."""
    if as_json:
        typer.echo(json.dumps(outcome))
        return
    typer.echo(line)
    _print_figures({k: outcome[k] for k in ("executed_by", "native_declined")})


def _print_figures(figures: dict[str, Any]) -> None:
    for key, value in figures.items():
        note = RESULT_NOTES.get(key)
        typer.echo(f"{key:>22}: {cell(value)}" + (f"  ({note})" if note else ""))
