"""Generated requests against a real `tms serve`, from its own OpenAPI document.

Every operation of the document gets requests that Schemathesis derives from it, valid ones
and invalid ones, and each request is sent once with each role's token (viewer, writer,
admin). The job routes (`/v1/jobs/...`) get role tokens, which are never job tokens, so they
are exercised on their 401 path. Every response must be: not a 5xx, a status the document
declares for the operation, of the declared content type, and valid against the declared
schema. The run is bounded (examples per operation and mode) and derandomized, so CI sends
the same requests every time. The server is a real `tms serve` (see conftest.py).

The operations are listed at collection from the application's document built in process
(no database needed), and `test_the_served_document_has_every_operation` checks that the
server serves the same ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import sessionmaker

from tests.fuzz.conftest import TOKENS, FuzzServer
from tms.api import create_app
from tms.config import load_settings

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = 35
"""Per operation and generation mode; each example is sent three times (one per role).
This is the module's bound: a fixed number of requests (about 5,600, near 80 s on 2 shared
cores), not a clock, so that every run sends the same requests. Shrinking is off,
so a failure costs no extra time either (its request is printed as a curl command)."""
REQUEST_TIMEOUT = 60
"""Seconds: a request that hangs fails the test instead of stalling the run."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def _document() -> dict[str, Any]:
    app = create_app(load_settings(config_file=False, environ={}), sessionmaker())
    return app.openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, GenerationMode]]:
    """Every operation in positive mode; in negative mode those with input to get wrong."""
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            found.append((path, method.upper(), GenerationMode.POSITIVE))
            if operation.get("parameters") or operation.get("requestBody"):
                found.append((path, method.upper(), GenerationMode.NEGATIVE))
    return sorted(found)


OPERATIONS = _operations(_document())


@pytest.fixture(scope="module")
def api_schema(fuzz_server: FuzzServer) -> Iterator[Any]:
    config = schemathesis.Config.from_dict({"seed": 20261123})
    yield schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json", config=config)


def test_the_served_document_has_every_operation(api_schema: Any) -> None:
    served = sorted(
        (path, method.upper())
        for path, item in api_schema.raw_schema["paths"].items()
        for method in item
        if method in HTTP_METHODS
    )
    assert served == sorted({(path, method) for path, method, _ in OPERATIONS})


@pytest.mark.parametrize(
    ("path", "method", "mode"), OPERATIONS, ids=[f"{m} {p} {g}" for p, m, g in OPERATIONS]
)
def test_operation_keeps_its_contract(
    api_schema: Any, fuzz_server: FuzzServer, path: str, method: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def send(case: Any) -> None:
        for token in TOKENS.values():
            case.call_and_validate(
                headers={"Authorization": f"Bearer {token}"}, checks=CHECKS, timeout=REQUEST_TIMEOUT
            )

    send()
