"""`/ui`: the console's static files, from the package, with their content types and a
strict allow-list (no other path is ever read), and `/v1/auth/whoami`, which the page asks
for the caller's role."""

from __future__ import annotations

import re
from importlib.resources import files
from typing import TYPE_CHECKING

import pytest

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, WRITER, MakeClient, bearer
from tms.hudi.actions import TABLE_SERVICE_ACTIONS

if TYPE_CHECKING:
    from starlette.testclient import TestClient


@pytest.mark.parametrize(
    ("path", "media_type", "marker"),
    [
        ("/ui", "text/html", b'<script src="/ui/app.js"'),
        ("/ui/", "text/html", b'<link rel="stylesheet" href="/ui/style.css">'),
        ("/ui/index.html", "text/html", b"<title>tms console</title>"),
        ("/ui/app.js", "text/javascript", b'"use strict";'),
        ("/ui/style.css", "text/css", b"--accent"),
    ],
)
def test_the_console_files_are_served_with_their_types(
    client: TestClient, path: str, media_type: str, marker: bytes
) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == f"{media_type}; charset=utf-8"
    assert marker in response.content
    assert response.headers["x-content-type-options"] == "nosniff"
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../app.py",
        "/ui/..%2fapp.py",
        "/ui/%2e%2e%2f%2e%2e%2fpyproject.toml",
        "/ui/console.py",
        "/ui/APP.JS",
        "/ui/app.js%00.css",
        "/ui/routes/console.py",
        "/ui/%2e",
    ],
)
def test_nothing_outside_the_allow_list_is_served(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404, (path, response.text[:200])
    assert b"import" not in response.content


def test_the_console_needs_no_token_but_its_data_does(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    assert client.get("/ui").status_code == 200
    refused = client.get("/v1/overview")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"


def test_whoami_says_the_role_of_the_token(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    for token, role in ((VIEWER, "viewer"), (WRITER, "writer"), (ADMIN, "admin")):
        answer = client.get("/v1/auth/whoami", headers=bearer(token))
        assert answer.status_code == 200
        assert answer.json() == {"role": role, "auth_enabled": True}
    unknown = client.get("/v1/auth/whoami", headers=bearer("nope"))
    assert unknown.status_code == 401
    assert unknown.json()["error"]["message"] == "unknown bearer token"
    assert client.get("/v1/auth/whoami").status_code == 401


def test_whoami_without_tokens_is_admin(client: TestClient) -> None:
    assert client.get("/v1/auth/whoami").json() == {"role": "admin", "auth_enabled": False}


def test_the_console_lists_no_table_services_itself() -> None:
    """Its action filter is the service's list (`/v1/overview/actions`), never an array of
    its own that a new table service would leave behind."""
    script = files("tms.api").joinpath("console", "app.js").read_text(encoding="utf-8")
    assert "/v1/overview/actions" in script
    lists = [
        [action for action in TABLE_SERVICE_ACTIONS if f'"{action}"' in array]
        for array in re.findall(r"\[[^\[\]]*\]", script)
    ]
    assert [named for named in lists if len(named) > 1] == []


def test_the_console_files_ship_in_the_package() -> None:
    """A non-editable install carries them: pyproject's package data names each kind."""
    import tomllib
    from pathlib import Path

    from tms.api.routes.console import ASSETS

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["tms"]
    for name in ASSETS:
        assert files("tms.api").joinpath("console", name).is_file()
        suffix = name.rsplit(".", 1)[1]
        assert f"api/console/*.{suffix}" in patterns
