"""Migration 0002: base paths stored before normalization get their one spelling."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.db_fixtures import PgServer, database_at
from tms.store import current_revision, upgrade

INSERT = text(
    "INSERT INTO tbl (db_name, table_name, base_path) VALUES (:db, :name, :path) RETURNING id"
)


@pytest.fixture
def at_0001(pg_server: PgServer) -> Iterator[str]:
    """A database migrated to 0001 only: base paths as the service stored them before."""
    with database_at(pg_server, "0001", "tms_test_0001") as url:
        yield url


def _insert(url: str, rows: list[tuple[str, str]]) -> list[int]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            return [
                conn.execute(INSERT, {"db": "lake", "name": name, "path": path}).scalar_one()
                for name, path in rows
            ]
    finally:
        engine.dispose()


def _paths(url: str) -> dict[int, str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, base_path FROM tbl")).all()
    finally:
        engine.dispose()
    return {row.id: row.base_path for row in rows}


def _revision(url: str) -> str | None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def test_stored_base_paths_are_normalized(at_0001: str) -> None:
    ids = _insert(
        at_0001,
        [
            ("a", "file:///lake/a/"),
            ("b", "/lake//b/./x/.."),
            ("c", "s3://bucket/c/"),
            ("d", "/lake/d"),
            ("junk", "relative/junk"),
        ],
    )
    upgrade(at_0001, "0002")
    assert _revision(at_0001) == "0002"
    assert _paths(at_0001) == dict(
        zip(ids, ["/lake/a", "/lake/b", "s3://bucket/c", "/lake/d", "relative/junk"], strict=True)
    )


def test_two_spellings_of_one_table_stop_the_upgrade_naming_both(at_0001: str) -> None:
    ids = _insert(at_0001, [("one", "/lake/t"), ("two", "file:///lake//t/"), ("ok", "/lake/u/")])
    with pytest.raises(RuntimeError, match=r"one table under different spellings") as refused:
        upgrade(at_0001)
    message = str(refused.value)
    assert f"table {ids[0]} lake.one" in message and f"table {ids[1]} lake.two" in message
    assert "/lake/u" not in message
    # Nothing changed, and the schema stays at 0001 until an operator chose.
    assert _revision(at_0001) == "0001"
    assert _paths(at_0001) == dict(
        zip(ids, ["/lake/t", "file:///lake//t/", "/lake/u/"], strict=True)
    )
