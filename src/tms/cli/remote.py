"""What every operator command shares: the service URL and token, one-line errors with
fixed exit codes (1: the API refused, 2: no answer), and naming tables by id or name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from tms.api_client import ApiClient, Json, ServiceRefused, ServiceUnreachable
from tms.config import SettingsError, load_settings
from tms.executor_choice import EXECUTORS, ExecutorChoice, parse_executor

__all__ = [
    "AsJson",
    "ExecutorOption",
    "Token",
    "Url",
    "connect",
    "qualified",
    "resolve_table",
    "split_name",
]

DEFAULT_URL = "http://127.0.0.1:9091"
DEFAULT_DB = "default"

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="TMS_URL",
        help="The service's URL. Default: TMS_URL, else TMS_PUBLIC_URL / host:port settings.",
        show_default=False,
    ),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="TMS_TOKEN", help="Bearer token (when auth is on).", show_default=False
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _executor(value: str | None) -> ExecutorChoice | None:
    if value is None:
        return None
    try:
        return parse_executor(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--executor") from None


ExecutorOption = Annotated[
    str | None,
    typer.Option(
        help=f"Who runs the plans: {', '.join(EXECUTORS)} (auto: native where it supports the "
        "table, else Hudi's own table-service code).",
        callback=_executor,
        show_default=False,
    ),
]
"""`tms ops submit`'s choice and `tms tables set`'s policy key, refused (exit 2) unless one
of `tms.executor_choice`' names."""


def service_url(url: str | None) -> str:
    """`--url`/`TMS_URL`, else where the settings say the service listens (what a CLI on
    the service's own host wants), else the default port on this host."""
    if url:
        return url
    try:
        return load_settings().api_url
    except SettingsError:
        return DEFAULT_URL


@contextmanager
def connect(url: str | None, token: str | None) -> Iterator[ApiClient]:
    """A client whose failures end the command with one line on stderr."""
    client = ApiClient(service_url(url), token)
    try:
        yield client
    except ServiceRefused as exc:
        typer.echo(f"error: {exc.message} (HTTP {exc.status} {exc.code})", err=True)
        raise typer.Exit(1) from exc
    except ServiceUnreachable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        client.close()


def split_name(name: str) -> tuple[str, str]:
    """`db.table`, or `table` in the default database (Hudi's own default)."""
    db_name, dot, table_name = name.partition(".")
    return (db_name, table_name) if dot else (DEFAULT_DB, name)


def qualified(item: Json) -> str:
    """`db.table` of a table or an operation."""
    return f"{item.get('db_name') or '?'}.{item.get('table_name') or '?'}"


def resolve_table(client: ApiClient, ref: str) -> Json:
    """A table by its id or by `db.table` name; an unknown one ends the command (exit 1)."""
    if ref.isdigit():
        return client.table(int(ref))
    db_name, table_name = split_name(ref)
    found = client.find_table(db_name, table_name)
    if found is None:
        typer.echo(f"error: no table {db_name}.{table_name} is registered", err=True)
        raise typer.Exit(1)
    return found
