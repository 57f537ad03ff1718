"""`tms demo`: the service end to end on this machine (see `tms.demo`)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from tms.cli.render import print_rows

if TYPE_CHECKING:
    from tms.demo import DemoReport

__all__ = ["DemoCommand", "demo"]


class DemoCommand(TyperCommand):
    """`tms demo --help` as click lays it out: paragraphs and option help wrapped to the
    terminal, nothing read as Rich markup (so `tms[s3-demo]` keeps its brackets)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["rich_markup_mode"] = None
        super().__init__(*args, **kwargs)


class DemoStorage(enum.StrEnum):
    local = "local"
    s3 = "s3"


class DemoEngine(enum.StrEnum):
    worker = "spark-worker"
    submit = "spark-submit"


def demo(
    base_path: Annotated[Path, typer.Option(help="Where to write the demo table.")] = Path(
        ".tms/demo/trips"
    ),
    data_dir: Annotated[
        Path, typer.Option(help="The demo service's state (embedded PostgreSQL, job logs).")
    ] = Path(".tms/demo-service"),
    rows: Annotated[int, typer.Option(help="Trips to insert (at least 100).")] = 20_000,
    rounds: Annotated[
        int, typer.Option(help="Compactions to trigger (3 delta commits each; at least 1).")
    ] = 2,
    master: Annotated[str, typer.Option(help="Spark master of the jobs.")] = "local[*]",
    table_version: Annotated[
        int,
        typer.Option(
            help="Hudi table version of the demo table: 6 (Hudi 0.14/0.15), 8 (1.0) or 9 (1.1).",
            metavar="<6|8|9>",
        ),
    ] = 9,
    metadata_table: Annotated[
        bool,
        typer.Option(
            help="Give the table a metadata table (files, record_index), as Hudi writers do by "
            "default.",
        ),
    ] = True,
    storage: Annotated[
        DemoStorage,
        typer.Option(
            help="Where the table lives: local disk (--base-path), or s3, a local S3 server "
            "(moto; pip install 'tms[s3-demo]') with the table registered with its storage "
            "options.",
        ),
    ] = DemoStorage.local,
    engine: Annotated[
        DemoEngine,
        typer.Option(
            help="What runs the table services: a resident Spark worker the service starts "
            "(spark-worker; the demo waits for its SparkSession before the first commit), or "
            "one spark-submit application per attempt.",
        ),
    ] = DemoEngine.worker,
    keep_running: Annotated[
        bool,
        typer.Option(
            "--keep-running",
            help="After the summary, keep the service up (API and web console) to look at "
            "what happened, until Ctrl-C or SIGTERM; then stop it.",
        ),
    ] = False,
) -> None:
    """Run tms with a Hudi writer: commits with callbacks, compaction and clean on Spark.

    While a Spark job runs, its progress (stage, file groups done out of planned) and its
    log file are printed; the web console's address is printed at the start and the end.
    What the libraries it runs log (the S3 server's access log among them) goes to
    demo.log in the data dir.

    Options are checked before anything starts: a bad one exits 2 with the reason, and a
    --base-path or --data-dir holding anything the demo did not write is never deleted."""
    # The demo brings the service, Spark's writer and the S3 server: only `tms demo` loads it.
    from tms.demo import LOG_FILE, DemoOptions, DemoRefused, run_demo

    options = DemoOptions(
        base_path=base_path,
        data_dir=data_dir,
        rows=rows,
        rounds=rounds,
        master=master,
        table_version=table_version,
        metadata_table=metadata_table,
        storage=storage.value,
        engine=engine.value,
        keep_running=keep_running,
    )

    def summarize(report: DemoReport) -> None:
        _summary(
            report,
            options.table_version,
            options.metadata_table,
            data_dir / LOG_FILE,
            keep_running,
        )

    try:
        report = run_demo(options, typer.echo, on_report=summarize)
    except DemoRefused as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if not report.ok:
        typer.echo("demo FAILED", err=True)
        raise typer.Exit(1)


def _summary(
    report: DemoReport,
    table_version: int,
    metadata_table: bool,
    log_file: Path,
    keep_running: bool,
) -> None:
    """What the demo did, printed while its service still runs; `log_file` holds what the
    libraries logged."""
    typer.echo("")
    typer.echo("Summary")
    typer.echo(
        f"  table:         {report.base_path} (merge-on-read, table version {table_version}, "
        + ("with" if metadata_table else "without")
        + " a metadata table)"
    )
    typer.echo(f"  commits:       {len(report.commits)} delta commits, each with a callback")
    if report.operations:
        rows_out = [
            {
                "id": op.id,
                "action": op.action,
                "instant": op.instant,
                "status": op.status,
                "attempts": op.attempts,
                "engine": op.engine,
                "duration": f"{op.duration_seconds:.1f}s" if op.duration_seconds else None,
                "written": op.files_written,
                "deleted": op.files_deleted,
            }
            for op in report.operations
        ]
        columns = [
            "id",
            "action",
            "instant",
            "status",
            "attempts",
            "engine",
            "duration",
            "written",
            "deleted",
        ]
        headers = ["op", *columns[1:7], "files +", "files -"]
        typer.echo("  operations:")
        print_rows(rows_out, columns, headers, indent="    ")
    typer.echo(
        f"  data files:    {report.files_before} before the last compaction and the clean, "
        f"{report.files_after} after"
    )
    typer.echo(f"  file groups:   {report.slices_before} before, {report.slices_after} after")
    verdict = (
        "reads the same before and after every table service"
        if not report.oracle_mismatches
        else f"DIFFERS after {', '.join(report.oracle_mismatches)}"
    )
    typer.echo(
        f"  oracle:        hudi-rs, {report.oracle_rows:,} rows, {report.oracle_checks} "
        f"check{'' if report.oracle_checks == 1 else 's'}: "
        f"{verdict}"
    )
    if report.timed_out:
        typer.echo("  timed out waiting for the service's operations")
    typer.echo(f"  took:          {report.seconds:.0f}s; service state in {log_file.parent}")
    typer.echo(f"  library logs:  {log_file}")
    later = "" if keep_running else " (stops with the demo: --keep-running keeps it up)"
    typer.echo(f"  web console:   {report.console_url}{later}")
