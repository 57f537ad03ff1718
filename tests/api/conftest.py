"""An app and a TestClient over the per-test database (`factory` from tests/db_fixtures.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import StarletteDeprecationWarning

from tms.api import create_app
from tms.config import Settings, load_settings
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

with warnings.catch_warnings():
    # starlette 1.x prefers httpx2 for its TestClient; httpx works the same for our tests.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

ADMIN = "adm1n-7f3c9e"
WRITER = "wr1ter-91ae0b"
VIEWER = "v1ewer-77d2aa"
AUTH_TOKENS = f"admin:{ADMIN},writer:{WRITER},viewer:{VIEWER}"
CALLBACK_KEY = "hudi_write_commit_http_callback"

MakeClient = Callable[..., TestClient]


def make_settings(**overrides: Any) -> Settings:
    return load_settings(config_file=False, environ={}, **overrides)


@pytest.fixture
def make_client(factory: sessionmaker[Session]) -> Iterator[MakeClient]:
    """Clients over the test database with settings overrides (auth_tokens=…, …)."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        app = create_app(make_settings(**overrides), factory)
        client = TestClient(app, client=("127.0.0.1", 50000))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    """Auth off (the default settings)."""
    return make_client()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def batch(ids: range, ts: int) -> pa.Table:
    items = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in items]),
            "ts": pa.array([ts] * len(items), pa.int64()),
            "fare": pa.array([float(i) for i in items]),
        }
    )


def mor_writer(root: Path, name: str = "trips", rows: int = 20) -> HudiWriter:
    """A real merge-on-read table (version 6) of database `lake` with one insert."""
    table = create_table(
        str(root / name),
        name,
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
        extra_properties={"hoodie.database.name": "lake"},
    )
    writer = HudiWriter(table)
    writer.insert(batch(range(rows), ts=1))
    return writer


@pytest.fixture
def mor_table(tmp_path: Path) -> HudiWriter:
    """A real merge-on-read table (version 6) with one insert."""
    return mor_writer(tmp_path)
