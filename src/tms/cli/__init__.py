"""The `tms` command line: table-layer commands, the service, the operator CLI, the demo.

Submodules import their heavy dependencies (Spark, FastAPI, the store) inside commands,
so `tms --help` and the operator CLI start quickly.
"""

from __future__ import annotations

import typer

from tms.cli import (
    archival,
    demo,
    operations,
    partition_ttl,
    savepoints,
    serve,
    table_layer,
    tables,
    workers,
)

__all__ = ["app", "main"]

app = typer.Typer(help="Table management service for Apache Hudi.", no_args_is_help=True)

app.command()(table_layer.timeline)
app.command()(table_layer.files)
app.command()(table_layer.metadata)
app.command()(table_layer.run)
app.command()(serve.serve)
app.add_typer(serve.db_app, name="db")
app.add_typer(tables.tables_app, name="tables")
app.add_typer(operations.ops_app, name="ops")
app.add_typer(savepoints.savepoints_app, name="savepoints")
app.add_typer(archival.archival_app, name="archival")
app.add_typer(partition_ttl.ttl_app, name="ttl")
app.command()(workers.worker)
app.add_typer(workers.workers_app, name="workers")
app.command(cls=demo.DemoCommand)(demo.demo)


def main() -> None:
    app()
