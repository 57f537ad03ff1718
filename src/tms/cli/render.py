"""Plain-text tables and key/value blocks shared by the commands (no colours: logs and
pipes read them as well as terminals)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import typer

__all__ = ["cell", "echo_json", "print_fields", "print_rows", "short_time"]


def cell(value: Any) -> str:
    """One value as table text: `-` for nothing, lists comma-joined."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def short_time(value: Any) -> str:
    """An ISO timestamp from the API as `YYYY-MM-DD HH:MM:SS` (UTC, as the API sends it)."""
    if not isinstance(value, str):
        return cell(value)
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


def print_rows(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    headers: Sequence[str] | None = None,
    indent: str = "",
) -> None:
    """Aligned columns with an upper-case header line."""
    names = list(headers or columns)
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    header = "  ".join(n.upper().ljust(w) for n, w in zip(names, widths, strict=True))
    typer.echo(indent + header)
    for r in cells:
        typer.echo(indent + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def print_fields(fields: Sequence[tuple[str, Any]]) -> None:
    """`key: value` lines with the keys right-aligned."""
    width = max((len(k) for k, _ in fields), default=0)
    for key, value in fields:
        typer.echo(f"{key:>{width}}: {cell(value)}")


def echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=False, default=str))
