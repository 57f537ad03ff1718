"""A real S3 endpoint on this machine: moto's S3 server on a free port, in a process of its
own (`tests/storage/s3_process.py`), one per session.

Credentials and the endpoint reach clients the standard ways, never through a patched
client: storage options for `Storage`, `AWS_*` environment variables for code that opens
tables by URI alone (Spark tasks, `HudiTable.open`), `aws_*` options for hudi-rs.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.storage.s3_process import WIRE_PATH
from tms.hudi.storage import Storage

ACCESS_KEY = "testing"
SECRET_KEY = "testing-secret-not-for-logs"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    """A running S3 server with one bucket."""

    url: str
    bucket: str
    wire: S3Process
    """Every request the server received, by kind."""

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.url, "key": ACCESS_KEY, "secret": SECRET_KEY}

    @property
    def hudi_rs_options(self) -> dict[str, str]:
        return {
            "aws_endpoint_url": self.url,
            "aws_allow_http": "true",
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_region": REGION,
        }

    @property
    def environment(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def base_path(self, name: str, scheme: str = "s3") -> str:
        """A fresh table location in the bucket (tests never share one)."""
        return f"{scheme}://{self.bucket}/{name}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class S3Process:
    """moto's S3 server in its own process on a fixed port, with one bucket; started again
    on the same port when it stopped serving."""

    STARTUP_SECONDS = 120.0

    def __init__(self, port: int, bucket: str, log: Path) -> None:
        self.port = port
        self.bucket = bucket
        self.log = log
        self.url = f"http://127.0.0.1:{port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        script = Path(__file__).with_name("s3_process.py")
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, str(script), str(self.port)],
                stdin=subprocess.PIPE,  # the server exits when this closes
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.STARTUP_SECONDS
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto's S3 server did not start: {self._log_tail()}")
            time.sleep(0.2)
        Storage(f"s3://{self.bucket}", storage_options=self.storage_options).fs.mkdir(self.bucket)

    def stop(self) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def ensure_serving(self) -> str | None:
        """Start the server again when it stopped serving; why it had stopped."""
        assert self._process is not None
        if self._process.poll() is None and self._answers():
            return None
        code = self._process.poll()
        reason = f"exit code {code}" if code is not None else "the port did not answer"
        reason = f"{reason}; its log ends: {self._log_tail()}"
        self.stop()
        self.start()
        return reason

    def snapshot(self) -> tuple[Counter[str], Counter[tuple[str, str]]]:
        """The requests the server received so far: by kind, by (kind, path class)."""
        with urllib.request.urlopen(self.url + WIRE_PATH, timeout=30) as answer:
            counts = json.load(answer)
        paths = Counter({(kind, path): count for kind, path, count in counts["paths"]})
        return Counter(counts["kinds"]), paths

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.url, "key": ACCESS_KEY, "secret": SECRET_KEY}

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + WIRE_PATH, timeout=10):
                return True
        except OSError:
            return False

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Process]:
    """moto's S3 server on a free port, in its own process, for the session."""
    log = tmp_path_factory.mktemp("s3-server") / "server.log"
    server = S3Process(free_port(), "lake", log)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _s3_serving(request: pytest.FixtureRequest) -> None:
    """Every test that uses the S3 server finds it serving; a server that stopped is started
    again on its port, and why it stopped goes to the test's output."""
    if "s3" in request.fixturenames:
        server: S3Process = request.getfixturevalue("s3_server")
        reason = server.ensure_serving()
        if reason is not None:
            print(f"moto's S3 server had stopped serving ({reason}); started again")


@pytest.fixture(scope="session")
def s3(s3_server: S3Process) -> Iterator[S3Endpoint]:
    """moto's S3 server, its bucket, and the environment that points clients at it."""
    endpoint = S3Endpoint(url=s3_server.url, bucket=s3_server.bucket, wire=s3_server)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in endpoint.environment.items():
            patch.setenv(name, value)
        yield endpoint


def spark_environment(spark: Any, endpoint: S3Endpoint) -> None:
    """The endpoint for Python tasks: a worker takes the SparkContext's environment of the
    job that starts it, whenever the session was created."""
    spark.sparkContext.environment.update(endpoint.environment)


UPLOAD_BATCH = 8
"""Files one upload sends at once. fsspec's default is an eighth of the open-files limit
(2,500 here): every file of a table at once, more connections than moto's one server
process accepts in time under a loaded suite (a connect timeout)."""


def upload(local_root: Path, endpoint: S3Endpoint, name: str) -> str:
    """A copy of a local table folder in the bucket; its `s3://` base path."""
    base_path = endpoint.base_path(name)
    storage = Storage(base_path, storage_options=endpoint.storage_options)
    storage.fs.put(f"{local_root}/", storage.root, recursive=True, batch_size=UPLOAD_BATCH)
    return base_path
