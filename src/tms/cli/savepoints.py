"""The operator CLI's `tms savepoints …`: a registered table's savepoints, through a running
service's API (listed by viewers, made by writers, removed by admins)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from tms.api_client import Json
from tms.cli.remote import AsJson, Token, Url, connect, qualified, resolve_table
from tms.cli.render import echo_json, print_rows

__all__ = ["savepoints_app"]

savepoints_app = typer.Typer(
    help="A table's savepoints: instants whose files the cleaner keeps (talks to the service).",
    no_args_is_help=True,
)

TableRef = Annotated[str, typer.Argument(help="Table id, or db.table (db defaults to 'default').")]
InstantArg = Annotated[str, typer.Argument(help="The instant: a completed write's time.")]


def _rows(savepoints: list[Json]) -> list[dict[str, Any]]:
    return [
        {
            "instant": s["instant"],
            "by": s["savepointed_by"],
            "at": datetime.fromtimestamp(s["savepointed_at"] / 1000, UTC).strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
            "files": s["files"],
            "comment": s["comment"],
        }
        for s in savepoints
    ]


@savepoints_app.command("ls")
def savepoints_ls(
    table: TableRef, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """The table's savepoints, oldest first, with the files each keeps from the cleaner."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        savepoints = client.savepoints(found["id"])
    if as_json:
        echo_json(savepoints)
        return
    if not savepoints:
        typer.echo(f"no savepoints on {qualified(found)}")
        return
    columns = ["instant", "by", "at", "files", "comment"]
    print_rows(_rows(savepoints), columns, ["instant", "by", "at (UTC)", "files", "comment"])


@savepoints_app.command("create")
def savepoints_create(
    table: TableRef,
    instant: InstantArg,
    comment: Annotated[str, typer.Option(help="Why it is made.")] = "",
    user: Annotated[str, typer.Option(help="Who makes it (savepointedBy).")] = "tms",
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Savepoint a completed commit, delta commit or replacecommit; again for the same instant
    it changes nothing."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        body = {"instant": instant, "user": user, "comment": comment}
        written = client.add_savepoint(found["id"], body)
    if as_json:
        echo_json(written)
        return
    savepoint = written["savepoint"]
    state = "made" if written["created"] else "stood already"
    typer.echo(
        f"savepoint {savepoint['instant']} on {qualified(found)} {state}: it keeps "
        f"{savepoint['files']} files from the cleaner"
    )


@savepoints_app.command("rm")
def savepoints_rm(
    table: TableRef,
    instant: InstantArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Remove a savepoint: the cleaner may then delete the files it kept."""
    with connect(url, token) as client:
        found = resolve_table(client, table)
        if not yes:
            typer.confirm(
                f"Remove savepoint {instant} of {qualified(found)}? The cleaner may then delete "
                "the files it keeps.",
                abort=True,
            )
        client.delete_savepoint(found["id"], instant)
    typer.echo(f"removed savepoint {instant} of {qualified(found)}")
