"""The session's S3 server: in its own process, counted, and started again when it died."""

from __future__ import annotations

from pathlib import Path

from tests.storage.conftest import S3Process, free_port
from tms.hudi.storage import Storage


def test_a_server_that_died_is_started_again_with_its_bucket(tmp_path: Path) -> None:
    server = S3Process(free_port(), "spare", tmp_path / "server.log")
    server.start()
    try:
        storage = Storage("s3://spare/t", storage_options=server.storage_options)
        storage.write_bytes("f", b"before")
        assert server.snapshot()[0]["PUT"] >= 1, "the write reached the server's count"
        assert server.ensure_serving() is None

        assert server._process is not None
        server._process.kill()
        server._process.wait()
        reason = server.ensure_serving()

        assert reason is not None and reason.startswith("exit code -9"), reason
        fresh = Storage("s3://spare/t2", storage_options=server.storage_options)
        fresh.write_bytes("f", b"after")  # the bucket is there again
        assert fresh.read_bytes("f") == b"after"
        assert server.snapshot()[0]["PUT"] >= 1, "a new process counts from zero"
    finally:
        server.stop()
    assert server._process is not None and server._process.poll() is not None
