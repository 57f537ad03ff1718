"""`GET /v1/tables/{id}/partition-ttl` against a table on disk whose partitions were written
in 2020 but one: the dry run of a partition TTL for a viewer (nothing written), the partitions
it would delete and those it keeps with why; bad input refused naming the field, for the
dry run and for an operation's submit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, MakeClient, bearer
from tests.api.helpers import register, submit
from tests.services.test_clean import batch, new_table
from tests.services.test_partition_ttl import Clock, frozen_clock
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def aged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """sf, nyc and la written on 2020-01-01; la written again now."""
    with monkeypatch.context() as patched:
        frozen_clock(patched, Clock.at("2020-01-01"))
        base, writer = new_table(tmp_path, MERGE_ON_READ, table_version=9)
        writer.insert(batch(range(30), ts=1))
    writer.insert(batch(range(32, 40, 3), ts=2))  # la only, at the wall clock's time
    return base


def registered(client: TestClient, base: str) -> int:
    body = {"db_name": "lake", "table_name": "trips", "base_path": base}
    made = client.post("/v1/tables", json=body, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    table_id: int = made.json()["id"]
    return table_id


def test_the_dry_run_says_what_would_go_and_writes_nothing(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    base = aged(tmp_path, monkeypatch)
    table_id = registered(client, base)
    before = HudiTable.open(base).timeline().instants
    url = f"/v1/tables/{table_id}/partition-ttl"

    answer = client.get(url, params={"days": 30}, headers=bearer(VIEWER))
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["table_id"] == table_id and report["ttl_days"] == 30
    assert report["partitions_selected"] == [] and report["not_selected"] == 0
    assert [v["partition"] for v in report["expired"]] == ["nyc", "sf"]
    assert all(v["last_commit_time"].startswith("20200101") for v in report["expired"])
    assert report["kept"] == [
        {
            "partition": "la",
            "last_commit_time": report["kept"][0]["last_commit_time"],
            "reason": "last commit within 30 days",
        }
    ]
    assert report["as_of"] > report["kept"][0]["last_commit_time"] and report["notes"] == []

    chosen = client.get(url, params={"days": 30, "partitions": "s*, x/*"}, headers=bearer(VIEWER))
    assert chosen.status_code == 200, chosen.text
    assert [v["partition"] for v in chosen.json()["expired"]] == ["sf"]
    assert chosen.json()["partitions_selected"] == ["s*", "x/*"]
    assert chosen.json()["not_selected"] == 2
    one = client.get(url, params={"days": 30, "max_partitions": 1}, headers=bearer(VIEWER)).json()
    assert len(one["expired"]) == 1 and "over the 1 partitions" in one["kept"][-1]["reason"]
    assert HudiTable.open(base).timeline().instants == before


def test_the_dry_run_takes_the_table_policys_ttl_where_the_query_gives_none(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    base = aged(tmp_path, monkeypatch)
    body = {
        "db_name": "lake",
        "table_name": "trips",
        "base_path": base,
        "policy": {"ttl_days": 30, "ttl_partitions": ["s*"], "ttl_max_partitions": 5},
    }
    made = client.post("/v1/tables", json=body, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    url = f"/v1/tables/{made.json()['id']}/partition-ttl"

    policy = client.get(url, headers=bearer(VIEWER)).json()
    assert policy["ttl_days"] == 30 and policy["partitions_selected"] == ["s*"]
    assert [v["partition"] for v in policy["expired"]] == ["sf"]
    asked = client.get(url, params={"days": 3, "partitions": ""}, headers=bearer(VIEWER)).json()
    assert asked["ttl_days"] == 3 and asked["partitions_selected"] == []
    assert [v["partition"] for v in asked["expired"]] == ["nyc", "sf"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "query.days"),
        ({"days": 0}, "query.days"),
        ({"days": "a week"}, "query.days"),
        ({"days": 36_501}, "query.days"),
        ({"days": 3, "max_partitions": 0}, "query.max_partitions"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    make_client: MakeClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, object],
    field: str,
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id = registered(client, aged(tmp_path, monkeypatch))
    refused = client.get(
        f"/v1/tables/{table_id}/partition-ttl", params=params, headers=bearer(VIEWER)
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation_error" and error["field"] == field


def test_an_unknown_table_and_a_missing_token_are_refused(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    missing = client.get("/v1/tables/99/partition-ttl?days=3", headers=bearer(VIEWER))
    assert missing.status_code == 404, missing.text
    assert client.get("/v1/tables/99/partition-ttl?days=3").status_code == 401


@pytest.mark.parametrize(
    ("extra_params", "field", "message"),
    [
        ({}, "ttl_days", "ttl_days is required"),
        ({"ttl_partitions": "dt=2020-*"}, "ttl_days", "ttl_days is required"),
        ({"ttl_days": "0"}, "ttl_days", "must be positive"),
        ({"ttl_days": "a week"}, "ttl_days", "expected an integer"),
        ({"ttl_days": "36501"}, "ttl_days", "must be at most 36500"),
        (
            {"hoodie.partition.ttl.strategy.days.retain": "3", "ttl_max_partitions": "0"},
            "ttl_max_partitions",
            "must be positive",
        ),
    ],
)
def test_a_submit_without_a_usable_ttl_is_refused_naming_the_field(
    client: TestClient, extra_params: dict[str, str], field: str, message: str
) -> None:
    register(client)
    refused = submit(client, "partition_ttl", extra_params=extra_params)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", f"body.extra_params.{field}")
    assert message in error["message"]


def test_a_submit_with_hudis_keys_is_taken(client: TestClient) -> None:
    register(client)
    params = {
        "hoodie.partition.ttl.strategy.days.retain": "30",
        "hoodie.partition.ttl.strategy.partition.selected": "dt=2020-01-01,dt=2020-01-02",
    }
    made = submit(client, "partition_ttl", extra_params=params)
    assert made.status_code == 201, made.text
    assert (made.json()["action"], made.json()["instant"]) == ("partition_ttl", None)
    assert made.json()["extra_params"] == params
