"""The embedded PostgreSQL of the default set-up: starts, creates the database, migrates."""

from __future__ import annotations

from pathlib import Path

from tms.store import Action, make_engine, make_session_factory, session_scope, submit_operation
from tms.store.db import is_up_to_date, upgrade
from tms.store.embedded import start_embedded
from tms.store.tables import register_table


def test_embedded_server_starts_creates_database_and_migrates(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with start_embedded(data_dir, cleanup="delete") as pg:
        assert (data_dir / "pg" / "PG_VERSION").is_file()
        url = pg.url()
        assert url.startswith("postgresql+psycopg://postgres@") and "/tms?" in url
        upgrade(url)
        engine = make_engine(url, pool_size=1)
        try:
            assert is_up_to_date(engine)
            with session_scope(make_session_factory(engine)) as session:
                table = register_table(
                    session, db_name="db", table_name="t", base_path="/data/t"
                ).table
                submit_operation(session, tbl_id=table.id, action=Action.CLEAN)
            # A second start on the same directory joins the running server.
            assert start_embedded(data_dir).url() == url
        finally:
            engine.dispose()
