"""A real S3 endpoint on this machine: moto's S3 server on a free port, one per session.

Credentials and the endpoint reach clients the standard ways, never through a patched
client: storage options for `Storage`, `AWS_*` environment variables for code that opens
tables by URI alone (Spark tasks, `HudiTable.open`), `aws_*` options for hudi-rs.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bench.storage import CountingMotoServer, WireLog

from tms.hudi.storage import Storage

ACCESS_KEY = "testing"
SECRET_KEY = "testing-secret-not-for-logs"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    """A running S3 server with one bucket."""

    url: str
    bucket: str
    wire: WireLog
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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[CountingMotoServer]:
    """moto's S3 server on a free port, for the session."""
    server = CountingMotoServer(free_port(), WireLog())
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _s3_serving(request: pytest.FixtureRequest) -> None:
    """Every test that uses the S3 server finds it serving: a server that stopped on its
    own (seen once under load, with no trace of why in the run) is started again on its
    port, and the reason goes to the test's output."""
    if "s3" in request.fixturenames:
        server: CountingMotoServer = request.getfixturevalue("s3_server")
        reason = server.ensure_serving()
        if reason is not None:
            print(f"moto's S3 server had stopped serving ({reason}); started again")


@pytest.fixture(scope="session")
def s3(s3_server: CountingMotoServer) -> Iterator[S3Endpoint]:
    """moto's S3 server, its bucket, and the environment that points clients at it."""
    endpoint = S3Endpoint(
        url=f"http://127.0.0.1:{s3_server.port}", bucket="lake", wire=s3_server.wire
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in endpoint.environment.items():
            patch.setenv(name, value)
        Storage(f"s3://{endpoint.bucket}", storage_options=endpoint.storage_options).fs.mkdir(
            endpoint.bucket
        )
        yield endpoint


def spark_environment(spark: Any, endpoint: S3Endpoint) -> None:
    """The endpoint for Python tasks: a worker takes the SparkContext's environment of the
    job that starts it, whenever the session was created."""
    spark.sparkContext.environment.update(endpoint.environment)


def upload(local_root: Path, endpoint: S3Endpoint, name: str) -> str:
    """A copy of a local table folder in the bucket; its `s3://` base path."""
    base_path = endpoint.base_path(name)
    storage = Storage(base_path, storage_options=endpoint.storage_options)
    storage.fs.put(f"{local_root}/", storage.root, recursive=True)
    return base_path
