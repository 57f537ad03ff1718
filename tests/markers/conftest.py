"""A registered real Hudi table and clients of the marker API over the test database."""

from __future__ import annotations

import posixpath
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import StarletteDeprecationWarning

from tests.api.conftest import make_settings, mor_writer
from tms.api import create_app
from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request, transition
from tms.store import register_table

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

BASE = "/v1/hoodie/marker"


@dataclass
class Table:
    base_path: str
    writer: Any

    def marker_dir(self, instant: str) -> str:
        """What Hudi's client sends: `metaClient.getMarkerFolderPath(instant)`."""
        return posixpath.join(self.base_path, ".hoodie", ".temp", instant)

    def begin(self, *instants: str, action: Action = Action.DELTA_COMMIT) -> None:
        """Put `instants` inflight on the timeline, as a writer does before its first marker
        (markers are served only for pending instants)."""
        hudi = HudiTable.open(self.base_path)
        for ts in instants:
            requested = request(hudi.storage, hudi.config, ts, action)
            transition(hudi.storage, hudi.config, requested, State.INFLIGHT)

    def complete(self, instant: str) -> None:
        """Complete a pending instant (empty commit metadata), as its writer would."""
        hudi = HudiTable.open(self.base_path)
        pending = hudi.timeline().get(instant)
        assert pending is not None and pending.is_pending
        transition(hudi.storage, hudi.config, pending, State.COMPLETED, CommitMetadata())

    def file_groups(self) -> list[tuple[str, str]]:
        view = HudiTable.open(self.base_path).file_system_view()
        return sorted((s.partition_path, s.file_id) for s in view.latest_file_slices())


def register(factory: sessionmaker[Session], base_path: str, name: str) -> None:
    with factory() as session:
        register_table(session, db_name="lake", table_name=name, base_path=base_path)
        session.commit()


@pytest.fixture
def table(tmp_path: Path, factory: sessionmaker[Session]) -> Table:
    """A real merge-on-read table (version 6, one insert), registered."""
    writer = mor_writer(tmp_path)
    base = str(tmp_path / "trips")
    register(factory, base, "trips")
    return Table(base, writer)


Serve = Callable[..., Any]


@pytest.fixture
def serve(factory: sessionmaker[Session]) -> Iterator[Serve]:
    """`with serve(**settings) as client:` an app over the test database (one event loop
    for the client's lifetime, as under uvicorn); its marker ownership let go at exit."""

    @contextmanager
    def make(**overrides: Any) -> Iterator[TestClient]:
        overrides.setdefault("marker_batch_interval_ms", 5)
        app = create_app(make_settings(**overrides), factory)
        try:
            with TestClient(app, client=("127.0.0.1", 50000)) as client:
                yield client
        finally:
            app.state.markers.close()

    yield make


def create(client: TestClient, marker_dir: str, name: str, base_path: str | None = None) -> Any:
    """`POST /create` exactly as `TimelineServerBasedWriteMarkers` sends it (no body, every
    parameter in the query; `basepath` only with early conflict detection)."""
    params = {"markerdirpath": marker_dir, "markername": name}
    if base_path is not None:
        params["basepath"] = base_path
    answer = client.post(f"{BASE}/create", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def get(client: TestClient, what: str, marker_dir: str) -> Any:
    answer = client.get(f"{BASE}/{what}", params={"markerdirpath": marker_dir})
    assert answer.status_code == 200, answer.text
    return answer.json()
