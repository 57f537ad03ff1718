"""The `tms` command line."""

from __future__ import annotations

import json
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


def main() -> None:
    app()
