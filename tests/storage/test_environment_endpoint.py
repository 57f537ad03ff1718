"""A table opened by its base path alone reaches the S3 endpoint the environment names when
it is opened, not the one it named when an earlier table of the process was opened."""

from __future__ import annotations

import pytest

from tms.hudi.storage import Storage


def test_the_environments_endpoint_is_read_when_a_table_is_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    first = Storage("s3://bucket/table").fs
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    second = Storage("s3://bucket/table").fs
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:3")
    third = Storage("s3a://bucket/table").fs
    named = Storage("s3://bucket/table", storage_options={"endpoint_url": "http://h:4"}).fs

    assert [fs.endpoint_url for fs in (first, second, third, named)] == [
        "http://127.0.0.1:1",
        "http://127.0.0.1:2",
        "http://127.0.0.1:3",  # the service-specific variable wins
        "http://h:4",  # options name their own
    ]
