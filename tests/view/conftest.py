"""A real app over the per-test database, tables registered in the store, and Hudi tables:
our writer's (versions 6 and 9) and the fixtures written by Hudi itself (`tests/fixtures`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import StarletteDeprecationWarning

from tests.api.conftest import make_settings
from tms.api import create_app
from tms.store import register_table
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter
from tms.view import ViewCache, ViewHandler

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

MakeClient = Callable[..., TestClient]
Register = Callable[[Path], str]


@pytest.fixture
def make_client(factory: sessionmaker[Session]) -> Iterator[MakeClient]:
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        """A client of a new app; its view reads the table's row on every request (no
        `ref_ttl`), so a recorded commit is seen by the very next request, and syncs
        whenever a client asks (no `sync_interval`)."""
        settings = make_settings(**overrides)
        app = create_app(settings, factory)
        app.state.view_handler = ViewHandler(
            ViewCache(settings.view_cache_tables), ref_ttl=0, sync_interval=0
        )
        client = TestClient(app, client=("127.0.0.1", 50000))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def http(make_client: MakeClient) -> TestClient:
    return make_client()


@pytest.fixture
def register(factory: sessionmaker[Session]) -> Register:
    """Register a table folder; returns its base path as Hudi's client spells a local one."""

    def do(root: Path) -> str:
        with factory() as session:
            register_table(session, db_name="lake", table_name=root.name, base_path=str(root))
            session.commit()
        return f"file:{root}"

    return do


def rows(ids: range, ts: int) -> pa.Table:
    items = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in items]),
            "region": pa.array(["eu" if i % 2 else "us" for i in items]),
            "ts": pa.array([ts] * len(items), pa.int64()),
            "fare": pa.array([float(i) for i in items]),
        }
    )


def own_table(root: Path, version: int, table_type: str = "MERGE_ON_READ") -> HudiWriter:
    """A partitioned table of our writer: two inserts and an upsert (log files on MOR)."""
    table = create_table(
        str(root),
        root.name,
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["region"],
        table_version=version,
    )
    writer = HudiWriter(table, max_file_rows=10)
    writer.insert(rows(range(0, 30), ts=1))
    writer.insert(rows(range(30, 50), ts=1))
    writer.upsert(rows(range(0, 50, 3), ts=2))
    return writer
