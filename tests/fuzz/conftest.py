"""A real `tms serve` process for the fuzz suite, with a token per role.

The server runs on a database of its own on the test PostgreSQL server (`pg_server`, a copy
of the migrated template: starting an embedded PostgreSQL per module would add seconds for
nothing the fuzz suite looks at). It is API only (`TMS_MAX_RUNNING_PER_INSTANCE=0`) and its
policies are off, so generated submissions never launch Spark.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.db_fixtures import PgServer
from tms.serve import free_port

READY_TIMEOUT = 120.0
TOKENS = {"admin": "fuzz-admin-5e1d", "writer": "fuzz-writer-0c7a", "viewer": "fuzz-viewer-93b2"}
CALLBACK_KEY = "fuzz-callback-key"


@dataclass(frozen=True)
class FuzzServer:
    url: str
    log: Path
    pid: int

    def output(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"tms serve exited early:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"tms serve not ready after {READY_TIMEOUT}s")


@pytest.fixture(scope="module")
def fuzz_server(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzServer]:
    name = f"tms_fuzz_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    pg_server.create_database(name, template=template_db)
    data_dir = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = data_dir / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    env |= {
        "TMS_DATABASE_URL": pg_server.url(name),
        "TMS_DATA_DIR": str(data_dir),
        "TMS_AUTH_TOKENS": ",".join(f"{role}:{token}" for role, token in TOKENS.items()),
        "TMS_CALLBACK_KEYS": CALLBACK_KEY,
        "TMS_MAX_RUNNING_PER_INSTANCE": "0",
        "TMS_COMPACTION_DELTA_COMMITS": "0",
        "TMS_CLEAN_COMMITS": "0",
        "TMS_DB_POOL_SIZE": "4",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tms", "serve", "--port", str(port)],
            cwd=data_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(proc, url, log)
        yield FuzzServer(url, log, proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        pg_server.drop_database(name)
