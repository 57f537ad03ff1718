"""The marker attack, against a real `tms serve` and real Spark jobs: a client without
credentials reads the timeline and the committed base files from the open view routes, then
sends a marker for every committed file into the folder of a pending compaction or clustering,
hoping its reconciliation deletes them. Markers sent before tms runs the plan land (the plan
may still be a writer's own); once tms runs it they are refused; either way the job deletes
no committed file, counts the foreign markers, and every row reads back through hudi-rs.

Table versions 6 and 9, each with and without a metadata table; a resident worker runs both
services on one warm SparkSession."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.e2e.conftest import Service, Services
from tests.e2e.test_service_e2e import rows, trips
from tms.hudi.table import HudiTable
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.plan import schedule_compaction
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = pytest.mark.spark

WORKER = {
    "workers": 1,
    "worker_slots": 1,
    "max_running_per_instance": 0,
}


def written_table(root: Path, table_version: int, metadata: bool) -> HudiWriter:
    """A merge-on-read table of 600 rows in 3 partitions, with log files to compact and
    small file groups to cluster."""
    table = create_table(
        str(root / "trips"),
        "trips",
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
        metadata_partitions=("files",) if metadata else (),
    )
    writer = HudiWriter(table, max_file_rows=50)
    writer.insert(trips(range(600), ts=1))
    writer.upsert(trips(range(0, 600, 7), ts=2))
    return writer


def committed_base_files(service: Service, base: str) -> list[str]:
    """What an attacker lists: the committed base files (relative paths), from the open view
    routes."""
    timeline = service.get("/v1/hoodie/view/timeline/instants/all", basepath=base)
    last = max(i["ts"] for i in timeline["instants"] if i["state"] == "COMPLETED")
    by_partition = service.get(
        "/v1/hoodie/view/basefiles/all/beforeoron",
        basepath=base,
        maxinstant=last,
        refreshoff="true",
    )
    prefix = base.rstrip("/") + "/"
    return sorted(
        dto["fullPath"].removeprefix(prefix) for dtos in by_partition.values() for dto in dtos
    )


def plant(service: Service, base: str, instant: str, files: list[str]) -> list[int]:
    statuses = []
    for path in files:
        answer = service.http.post(
            "/v1/hoodie/marker/create",
            params={
                "markerdirpath": f"{base}/.hoodie/.temp/{instant}",
                "markername": f"{path}.marker.CREATE",
            },
        )
        statuses.append(answer.status_code)
    return statuses


def run_attacked(
    service: Service, base: str, word: str, instant: str, files: list[str]
) -> dict[str, Any]:
    """Plant markers for `files` while `instant` is a plan nobody runs yet, submit it, try
    again once tms runs it, and return the finished operation."""
    assert plant(service, base, instant, files) == [200] * len(files)
    submitted = service.post(
        f"/v1/hoodie/service/{word}/submit",
        {"db_name": "lake", "table_name": "trips", "instant": instant},
    )
    assert set(plant(service, base, instant, files[:2])) == {409}, "tms runs it now"
    operation = service.wait_terminal(submitted["id"], timeout=300)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    return operation


def foreign_counted(service: Service) -> float:
    text = service.http.get("/metrics").text
    found = re.findall(r"^tms_foreign_markers_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    return sum(float(v) for v in found)


@pytest.mark.parametrize("metadata", [False, True], ids=["no-mdt", "mdt"])
@pytest.mark.parametrize("table_version", [6, 9])
def test_markers_for_committed_files_delete_nothing(
    services: Services, tmp_path: Path, table_version: int, metadata: bool
) -> None:
    writer = written_table(tmp_path, table_version, metadata)
    base = writer.table.base_path
    expected = rows(base)
    assert len(expected) == 600
    service = services.start("a", **WORKER)
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "trips", "base_path": base},
    )

    plans = {
        "compact": lambda: schedule_compaction(HudiTable.open(base)),
        "cluster": lambda: schedule_clustering(HudiTable.open(base), small_file_limit=1 << 30),
    }
    for word, schedule in plans.items():
        committed = committed_base_files(service, base)
        assert len(committed) >= 12  # 50-row files over 3 partitions
        instant = schedule()
        assert instant is not None
        operation = run_attacked(service, base, word, instant, committed)
        [attempt] = service.attempts(operation["id"])
        assert attempt["figures"]["foreign_markers"] == len(committed)
        assert all((Path(base) / f).is_file() for f in committed), "no committed file touched"
        assert rows(base) == expected
    assert sorted(oracle.rows_by_key(base)) == sorted(r["id"] for r in expected)
    assert foreign_counted(service) >= 2 * 12
