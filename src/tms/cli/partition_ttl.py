"""The operator CLI's `tms ttl …`: a registered table's partition TTL dry run, through a
running service's API (viewers): the partitions a partition TTL would delete now and those it
keeps, and why. Deleting is an operation: `tms ops submit partition_ttl` with `ttl_days`."""

from __future__ import annotations

from typing import Annotated

import typer

from tms.cli.remote import AsJson, Token, Url, connect, qualified, resolve_table
from tms.cli.render import echo_json, print_rows
from tms.planning import MAX_TTL_DAYS

__all__ = ["ttl_app"]

ttl_app = typer.Typer(
    help="Partition TTL of a table: what it would delete (talks to the service).",
    no_args_is_help=True,
)

TableRef = Annotated[str, typer.Argument(help="Table id, or db.table (db defaults to 'default').")]
Days = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=MAX_TTL_DAYS,
        help="Partitions whose last commit is older than this many days go "
        "(hoodie.partition.ttl.strategy.days.retain); default the table policy's ttl_days.",
    ),
]
Partitions = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated glob patterns over partition paths (* matches any characters, "
        "/ included); default the table policy's ttl_partitions, else every partition."
    ),
]
MaxPartitions = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="The most partitions one run deletes; default the table policy's "
        "ttl_max_partitions, else Hudi's 1000.",
    ),
]
COLUMNS = ["partition", "last_commit_time", "reason"]


@ttl_app.command("dry-run")
def ttl_dry_run(
    table: TableRef,
    days: Days = None,
    partitions: Partitions = None,
    max_partitions: MaxPartitions = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """The partitions a partition TTL of --days days (default the table policy's) would
    delete now (oldest last commit first) and the selected ones it keeps, each with why;
    nothing is written."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        report = client.partition_ttl_dry_run(
            found["id"], days, partitions=partitions, max_partitions=max_partitions
        )
    if as_json:
        echo_json(report)
        return
    name = qualified(found)
    for note in report["notes"]:
        typer.echo(f"nothing to delete on {name}: {note}")
    if report["notes"]:
        return
    expired, kept = report["expired"], report["kept"]
    others = f"; {report['not_selected']} not selected" if report["not_selected"] else ""
    typer.echo(
        f"partition TTL of {report['ttl_days']} days on {name} as of {report['as_of']}: "
        "would delete "
        f"{len(expired)} partitions, keep {len(kept)}{others}"
    )
    if expired or kept:
        print_rows([*expired, *kept], COLUMNS, ["partition", "last commit", "reason"])
