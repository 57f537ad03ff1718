"""A local S3 server for `tms demo --storage s3`: moto's S3 server on a free port with one
bucket, and the settings that reach it (storage options for the service's table, `AWS_*`
variables for the demo's writer and its jobs, hudi-rs's options for the oracle).

moto is not one of `tms`'s dependencies (a production service talks to a real store): the
demo asks for it by name (`pip install 'tms[s3-demo]'`) when it is missing, before it starts
anything. The server's access log is a library's log like any other: `tms.demo.logs` sends
it to the demo's log file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tms.demo.options import DemoRefused
from tms.hudi.storage import Storage
from tms.serve import free_port

__all__ = ["BUCKET", "LocalS3", "MissingS3Server", "local_s3", "require_s3_server"]

BUCKET = "tms-demo"
REGION = "us-east-1"
KEY = "demo-access-key"
SECRET = "demo-secret-key"


class MissingS3Server(DemoRefused):
    """moto's S3 server is not installed."""


def require_s3_server() -> None:
    """Refuse `--storage s3` up front when moto's server cannot be imported."""
    try:
        from moto.server import ThreadedMotoServer  # noqa: F401
    except ImportError as exc:
        raise MissingS3Server(
            "tms demo --storage s3 runs a local S3 server (moto): pip install 'tms[s3-demo]'"
        ) from exc


@dataclass(frozen=True)
class LocalS3:
    url: str

    def base_path(self, name: str) -> str:
        return f"s3://{BUCKET}/{name}"

    @property
    def storage_options(self) -> dict[str, Any]:
        """What an admin sets on the table: the service and its jobs need nothing else."""
        return {"endpoint_url": self.url, "key": KEY, "secret": SECRET}

    @property
    def environment(self) -> dict[str, str]:
        """For the demo's own writer, which opens the table by its base path."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    @property
    def hudi_rs_options(self) -> dict[str, str]:
        return {
            "aws_endpoint_url": self.url,
            "aws_allow_http": "true",
            "aws_access_key_id": KEY,
            "aws_secret_access_key": SECRET,
            "aws_region": REGION,
        }


@contextmanager
def local_s3() -> Iterator[LocalS3]:
    """moto's S3 server with the demo's bucket, stopped on exit."""
    require_s3_server()
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        s3 = LocalS3(f"http://127.0.0.1:{port}")
        # moto keeps its buckets per process: a second server in one process has it already
        Storage(f"s3://{BUCKET}", storage_options=s3.storage_options).fs.makedirs(
            BUCKET, exist_ok=True
        )
        yield s3
    finally:
        server.stop()
