"""The operator CLI's `tms archival …`: a registered table's archival dry run, through a
running service's API (viewers): what Hudi's archiver would move out of the active timeline
now, and why it stops there. Archiving itself is an operation: `tms ops submit archival`."""

from __future__ import annotations

from typing import Annotated

import typer

from tms.cli.remote import AsJson, Token, Url, connect, qualified, resolve_table
from tms.cli.render import echo_json, print_rows

__all__ = ["archival_app"]

archival_app = typer.Typer(
    help="Timeline archival of a table: what it would archive (talks to the service).",
    no_args_is_help=True,
)

TableRef = Annotated[str, typer.Argument(help="Table id, or db.table (db defaults to 'default').")]
KeepMin = Annotated[
    int | None,
    typer.Option(min=1, help="hoodie.keep.min.commits (default: the table's, else Hudi's 20)."),
]
KeepMax = Annotated[
    int | None,
    typer.Option(min=1, help="hoodie.keep.max.commits (default: the table's, else Hudi's 30)."),
]


@archival_app.command("dry-run")
def archival_dry_run(
    table: TableRef,
    keep_min: KeepMin = None,
    keep_max: KeepMax = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """What an archival would move out of the table's active timeline now, the earliest
    commit it leaves, and the rule it stops at; nothing is written."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        plan = client.archival_dry_run(found["id"], keep_min=keep_min, keep_max=keep_max)
    if as_json:
        echo_json(plan)
        return
    name = qualified(found)
    keep = f"keep.min {plan['keep_min']}, keep.max {plan['keep_max']}"
    if not plan["due"]:
        typer.echo(f"nothing to archive on {name} ({keep}): {plan['reason']}")
        return
    typer.echo(
        f"archival of {name} would archive {len(plan['instants'])} instants "
        f"({plan['commits_archived']} commits of {plan['completed_commits']}; {keep}), "
        f"keeping from {plan['earliest_kept']}: {plan['reason']}"
    )
    print_rows(plan["instants"], ["instant", "action", "completion_time"])
