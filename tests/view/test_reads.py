"""Reads as Hudi's writers make them, replayed against `tms serve`'s view and compared with
hudi-rs (the same latest slices and base files) on our writer's tables of versions 6 and 9
and on the tables Hudi itself wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from hudi import HudiReadOptions
from hudi import HudiTable as HudiRsTable
from tests import oracle
from tests.hudi.test_fixture_views import (
    WITH_METADATA_TABLE,
    WITHOUT_METADATA_TABLE,
    unzip_fixture,
    without_metadata_table,
)
from tests.view.conftest import Register, own_table
from tests.view.java_client import JavaViewClient


def partitions_of(root: Path) -> list[str]:
    return sorted(
        str(p.parent.relative_to(root)).replace(".", "")
        for p in root.rglob(".hoodie_partition_metadata*")
        if ".hoodie" not in p.parent.relative_to(root).parts
    )


def slices_seen(client: JavaViewClient, partitions: list[str]) -> list[dict[str, Any]]:
    """Every partition's latest slices, keyed as the oracle keys them."""
    out = []
    for partition in partitions:
        for dto in client.get_latest_file_slices(partition):
            base = dto["baseFile"]
            out.append(
                {
                    "partition": dto["partition"],
                    "file_id": dto["fileId"],
                    "base_instant": dto["baseInstant"],
                    "base_file": base["fullPath"].rsplit("/", 1)[-1] if base else "",
                    "log_files": sorted(
                        (lf["path"].rsplit("/", 1)[-1] for lf in dto["logFiles"]),
                        key=lambda name: (
                            name.split(".log.")[0],
                            int(name.split(".log.")[1].split("_")[0]),
                        ),
                    ),
                }
            )
    return sorted(out, key=lambda s: (s["partition"], s["file_id"]))


def oracle_slices(root: Path) -> list[dict[str, Any]]:
    return [
        {**s, "base_file": s["base_file"] or "", "log_files": list(s["log_files"])}
        for s in oracle.file_slices(str(root))
    ]


def base_files_seen(client: JavaViewClient, partitions: list[str]) -> set[str]:
    return {
        dto["fullPath"].rsplit("/", 1)[-1]
        for partition in partitions
        for dto in client.get_latest_base_files(partition)
    }


def check_against_oracle(client: JavaViewClient, root: Path) -> None:
    partitions = partitions_of(root)
    expected = oracle_slices(root)
    assert expected, "the oracle sees no file slices"
    assert slices_seen(client, partitions) == expected
    assert base_files_seen(client, partitions) == {
        s["base_file"] for s in expected if s["base_file"]
    }


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_latest_slices_and_base_files_match_hudi_rs_on_our_tables(
    tmp_path: Path, http: TestClient, register: Register, version: int, table_type: str
) -> None:
    root = tmp_path / f"trips_v{version}"
    own_table(root, version, table_type)
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)
    if table_type == "MERGE_ON_READ":
        assert any(s["log_files"] for s in oracle_slices(root)), "upserts should have written logs"


@pytest.mark.parametrize("name", WITHOUT_METADATA_TABLE + WITH_METADATA_TABLE)
def test_latest_slices_match_hudi_rs_on_hudi_written_tables(
    tmp_path: Path, http: TestClient, register: Register, name: str
) -> None:
    root = unzip_fixture(name, tmp_path)
    if name in WITH_METADATA_TABLE:
        root = without_metadata_table(root)
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)


def oracle_as_of(root: Path, ts: str) -> list[dict[str, Any]]:
    slices = HudiRsTable(str(root)).get_file_slices(
        options=HudiReadOptions().with_as_of_timestamp(ts)
    )
    return sorted(
        (
            {
                "partition": s.partition_path,
                "file_id": s.file_id,
                "base_instant": s.creation_instant_time,
                "base_file": s.base_file_name or "",
                "log_files": sorted(s.log_file_names),
            }
            for s in slices
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )


@pytest.mark.parametrize(
    "name", ["cow_v8_nonpartitioned", "cow_v9_txns_simple_nometa", "mor_avro_v9_txns_simple_nometa"]
)
def test_slices_and_base_files_before_or_on_every_instant_match_hudi_rs_time_travel(
    tmp_path: Path, http: TestClient, register: Register, name: str
) -> None:
    """`slices/beforeoron/latest` and `datafiles/beforeoron/latest` at each completed write
    (inserts, an insert overwrite and a clustering replacing file groups, a compaction) are
    hudi-rs's snapshot as of that instant."""
    root = unzip_fixture(name, tmp_path)
    client = JavaViewClient(http, register(root), root)
    partitions = partitions_of(root)
    writes = [ts for ts, action, state in client.instants if state == "COMPLETED"]
    replaced_seen = False
    for ts in writes:
        expected = oracle_as_of(root, ts)
        seen = []
        bases = set()
        for partition in partitions:
            for dto in client.call(
                "slices/beforeoron/latest/",
                partition=partition,
                maxinstant=ts,
                includependingcompaction="true",
            ):
                base = dto["baseFile"]
                seen.append(
                    {
                        "partition": dto["partition"],
                        "file_id": dto["fileId"],
                        "base_instant": dto["baseInstant"],
                        "base_file": base["fullPath"].rsplit("/", 1)[-1] if base else "",
                        "log_files": sorted(
                            lf["path"].rsplit("/", 1)[-1] for lf in dto["logFiles"]
                        ),
                    }
                )
            bases |= {
                d["fullPath"].rsplit("/", 1)[-1]
                for d in client.call(
                    "datafiles/beforeoron/latest/", partition=partition, maxinstant=ts
                )
            }
            replaced_seen |= bool(
                client.call("filegroups/replaced/beforeoron/", partition=partition, maxinstant=ts)
            )
        assert sorted(seen, key=lambda s: (s["partition"], s["file_id"])) == expected, ts
        every = client.call("slices/all/beforeoron/latest/", maxinstant=ts)
        assert sorted(
            (d["partition"], d["fileId"], d["baseInstant"]) for ds in every.values() for d in ds
        ) == [(s["partition"], s["file_id"], s["base_instant"]) for s in expected], ts
        assert bases == {s["base_file"] for s in expected if s["base_file"]}, ts
    if name != "cow_v8_nonpartitioned":
        assert replaced_seen, "the fixture's insert overwrite and clustering replace file groups"
