"""The `tms` command line."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tms.hudi.table import HudiError, HudiTable

app = typer.Typer(help="Table management service for Apache Hudi.", no_args_is_help=True)

BasePath = Annotated[str, typer.Option("--base-path", help="Base path of the Hudi table.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _open(base_path: str) -> HudiTable:
    try:
        return HudiTable.open(base_path)
    except HudiError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _print_rows(rows: list[dict[str, Any]], columns: list[str]) -> None:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


@app.command()
def timeline(base_path: BasePath, as_json: AsJson = False) -> None:
    """Print the timeline: every instant with action, state and times."""
    table = _open(base_path)
    rows = table.timeline().describe()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "table": table.name,
                    "base_path": base_path,
                    "table_version": table.config.table_version,
                    "instants": rows,
                },
                indent=2,
            )
        )
        return
    _print_rows(rows, ["instant", "action", "state", "completion_time", "requested_as"])


@app.command()
def files(base_path: BasePath, as_json: AsJson = False) -> None:
    """Print file groups with their latest file slices."""
    table = _open(base_path)
    view = table.file_system_view()
    rows = view.describe()
    if as_json:
        typer.echo(
            json.dumps({"table": table.name, "base_path": base_path, "file_slices": rows}, indent=2)
        )
        return
    _print_rows(rows, ["partition", "file_id", "base_instant", "base_file", "log_files"])


class Service(enum.StrEnum):
    compaction = "compaction"
    clustering = "clustering"
    clean = "clean"


@app.command()
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
    heartbeat_interval: Annotated[
        float, typer.Option(help="Seconds between heartbeats of the running instant.")
    ] = 60.0,
    as_json: AsJson = False,
) -> None:
    """Schedule (unless --instant is given) and execute a table service on Spark."""
    from tms.services import runner

    table = _open(base_path)
    request = runner.ServiceRequest(
        service=service.value,
        instant=instant,
        master=master,
        parallelism=parallelism,
        strategy=strategy,
        target_file_size=target_file_size,
        small_file_limit=small_file_limit,
        sort_columns=[c.strip() for c in sort_columns.split(",") if c.strip()],
        policy=policy,
        retain=retain,
        heartbeat_interval=heartbeat_interval,
    )
    try:
        result = runner.run_service(table, request)
    except (HudiError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if result is None:
        message = {"service": service.value, "state": "NOTHING_TO_DO"}
        typer.echo(json.dumps(message) if as_json else f"{service.value}: nothing to schedule")
        return
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    for key, value in result.to_dict().items():
        typer.echo(f"{key:>22}: {_cell(value)}")


@app.command()
def demo(
    base_path: Annotated[
        str, typer.Option(help="Where to write the demo table.")
    ] = ".tms/demo/trips",
    rows: Annotated[int, typer.Option(help="Trips to insert.", min=100)] = 20_000,
    master: Annotated[str, typer.Option(help="Spark master.")] = "local[*]",
) -> None:
    """Write a merge-on-read table, compact, cluster and clean it on Spark, check it."""
    from tms.demo import run_demo

    report = run_demo(str(Path(base_path).resolve()), rows, master, typer.echo)
    typer.echo("")
    typer.echo("Summary")
    typer.echo(f"  table:            {report.base_path}")
    typer.echo(f"  delta commits:    {len(report.commits)}")
    for result in report.results:
        typer.echo(
            f"  {result.action:<16}  {result.instant}  {result.state}  "
            f"{result.duration_seconds:.1f}s  written={result.files_written} "
            f"deleted={result.files_deleted}"
        )
    typer.echo(f"  data files:       {report.files_before} before, {report.files_after} after")
    typer.echo(f"  file groups:      {report.slices_before} before, {report.slices_after} after")
    verdict = "reads the same" if report.oracle_matches else "DIFFERS"
    typer.echo(f"  oracle (hudi-rs): {report.oracle_rows} rows, {verdict} before and after")
    if not report.oracle_matches:
        raise typer.Exit(1)


def main() -> None:
    app()
