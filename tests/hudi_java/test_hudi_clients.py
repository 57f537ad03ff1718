"""Apache Hudi's own clients talk to a real `tms serve` as they ship, with the writer options
the README's "Using tms with Hudi writers" quotes:

- the HTTP commit callback (`hoodie.write.commit.callback.*`): every commit Hudi's Spark
  writer makes is recorded, the table's compaction policy turns them into a compaction that
  a Spark job of tms runs, and Hudi's reader and writer go on with the table;
- the table-service-manager client (`hoodie.table.service.manager.*`): the writer schedules
  a compaction and a clustering plan inline and delegates them; tms executes Hudi's own plans
  while the writer keeps committing, and Hudi reads the rows right after.

Each test runs one `tms serve` (tests/e2e/conftest.py) next to the Hudi release's session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from tests.e2e.conftest import Service, Services, services
from tests.hudi_java import service_manager_config
from tests.hudi_java.support import HUDI_0_15, HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA
from tests.hudi_java.writer_options import (
    COMMIT_CALLBACK,
    SERVICES_OFF_THE_WRITER,
    TABLE_SERVICE_MANAGER,
    filled,
)
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.store import Commit

__all__ = ["services"]  # the e2e fixture: `tms serve` in a subprocess

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]

CALLBACK_KEY = "hudi-writers-7f3a"
"""The key tms accepts (`TMS_CALLBACK_KEYS`) and the writer sends (`…http.api.key`)."""
JOB_TIMEOUT = 420.0
"""Seconds for an operation to finish, its worker's SparkSession start among them on a
loaded 2-core machine."""
RESIDENT_WORKER = {"workers": 1, "worker_slots": 1, "max_running_per_instance": 0}
"""The operations run on a resident Spark worker `tms serve` starts, whose SparkSession
starts while Hudi writes: no JVM start per operation."""


def releases_and_versions(*cases: tuple[HudiRelease, int]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        ("release", "table_version"),
        cases,
        ids=[f"hudi-{release.version}-v{version}" for release, version in cases],
    )


# Each case costs about two minutes of Hudi writes and Spark jobs. All of (1.2.0, 6),
# (1.2.0, 9) and (0.15.0, 6) pass both tests; these keep what differs: the table versions
# of the newest release for the callback, the oldest client (whose actions differ) and the
# newest layout for delegation.
CALLBACK_CASES = pytest.mark.parametrize(
    ("release", "table_version"),
    [
        pytest.param(HUDI_1_2, 6, id="hudi-1.2.0-v6", marks=pytest.mark.extended),
        pytest.param(HUDI_1_2, 9, id="hudi-1.2.0-v9"),
    ],
)
DELEGATION_CASES = releases_and_versions((HUDI_1_2, 9), (HUDI_0_15, 6))


def table_options(release: HudiRelease, path: Path, table_version: int) -> dict[str, str]:
    """A merge-on-read table keyed by `key`, ordered by `ts`, partitioned by `part`; new keys
    go to new file groups (`small.file.limit` 0), so a partition holds several to cluster."""
    return {
        **keyed_table(path.name),
        "hoodie.parquet.small.file.limit": "0",
        **release.write_options(table_version),
    }


def callback_options(service: Service) -> dict[str, str]:
    """Hudi's HTTP commit callback to tms (HoodieWriteCommitCallbackConfig)."""
    return filled(
        COMMIT_CALLBACK, tms_host="127.0.0.1", tms_port=service.port, callback_key=CALLBACK_KEY
    )


def service_manager_options(service: Service) -> dict[str, str]:
    """Hudi's table-service-manager client to tms (HoodieTableServiceManagerConfig)."""
    return filled(TABLE_SERVICE_MANAGER, tms_host="127.0.0.1", tms_port=service.port)


NO_DEFAULT = {
    HUDI_1_2: ["hoodie.table.service.manager.deploy.extra.params"],
    HUDI_0_15: [
        "hoodie.table.service.manager.actions",
        "hoodie.table.service.manager.deploy.extra.params",
    ],
}
"""The client's properties each release reads but gives no default (service_manager_config)."""


class Model:
    """The rows the table should hold, kept beside Hudi's writes."""

    def __init__(self, late_update_wins: bool) -> None:
        self.rows: dict[str, Row] = {}
        self.late_update_wins = late_update_wins
        """Hudi before 1.0 keeps the later write; 1.x the higher ordering value (`ts`)."""

    def upsert(self, rows: list[Row]) -> None:
        for row in rows:
            old = self.rows.get(row[0])
            if old is None or self.late_update_wins or row[1] >= old[1]:
                self.rows[row[0]] = row

    def delete(self, rows: list[Row]) -> None:
        for row in rows:
            self.rows.pop(row[0], None)

    def expected(self) -> list[Row]:
        return sorted(self.rows.values())


class Writer:
    """Hudi's Spark writer on one table with fixed options, and the model beside it."""

    def __init__(self, hudi: HudiSpark, path: Path, options: dict[str, str]) -> None:
        self.hudi = hudi
        self.path = path
        self.options = options
        self.model = Model(late_update_wins=hudi.release is HUDI_0_15)

    def write(self, operation: str, rows: list[Row], **extra: str) -> None:
        options = {**self.options, **extra, "hoodie.datasource.write.operation": operation}
        self.hudi.write(self.path, rows, SCHEMA, options)
        if operation == "delete":
            self.model.delete(rows)
        else:
            self.model.upsert(rows)

    def reads_right(self) -> None:
        assert self.hudi.read(self.path, COLUMNS) == self.model.expected()


def completed(path: Path) -> list[tuple[str, str]]:
    """The data table's completed instants (time, action), as tms reads its timeline."""
    timeline = HudiTable.open(str(path)).timeline()
    return [(i.requested_time, i.action.value) for i in timeline.completed()]


def registered(service: Service, path: Path) -> dict[str, Any] | None:
    """The table tms registered at `path`, if any."""
    for table in service.get("/v1/tables", limit=500)["items"]:
        if table["base_path"] == str(path):
            return dict(table)
    return None


def recorded_commits(engine: Engine, table_id: int) -> dict[str, tuple[str, bool]]:
    """The commits tms stored for the table: instant → (action, read by a pull)."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(Commit.instant, Commit.action, Commit.pulled).where(Commit.tbl_id == table_id)
        ).all()
    return {instant: (action, pulled) for instant, action, pulled in rows}


def operations_of(service: Service, table_id: int, action: str) -> list[dict[str, Any]]:
    return service.operations(table_id=table_id, action=action)


def completed_operation(service: Service, operation_id: int) -> dict[str, Any]:
    operation = service.wait_terminal(operation_id, timeout=JOB_TIMEOUT)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    return operation


@CALLBACK_CASES
def test_hudi_commit_callbacks_drive_a_policy_compaction_that_hudi_reads_and_writes_on(
    services: Services,
    engine: Engine,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    release: HudiRelease,
    table_version: int,
) -> None:
    service = services.start(
        "a", compaction_delta_commits=3, callback_keys=CALLBACK_KEY, **RESIDENT_WORKER
    )
    path = tmp_path / f"trips_v{table_version}"
    options = {
        **table_options(release, path, table_version),
        **callback_options(service),
        **SERVICES_OFF_THE_WRITER,
    }
    writer = Writer(hudi_spark(release), path, options)

    writer.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    writer.write("upsert", [("k1", 20, "p1", 1.5), ("k2", 5, "p0", 2.5), ("k8", 10, "p2", 8.0)])
    writer.write("delete", [("k3", 30, "p1", 0.0)])

    table = registered(service, path)
    assert table is not None, "the commit callback did not register the table"
    delta_commits = [t for t, action in completed(path) if action == Action.DELTA_COMMIT.value]
    assert len(delta_commits) == 3
    commits = recorded_commits(engine, table["id"])
    assert {t: commits.get(t) for t in delta_commits} == dict.fromkeys(
        delta_commits, ("deltacommit", False)
    )
    assert table["last_commit_instant"] == delta_commits[-1]

    [compaction] = operations_of(service, table["id"], "compaction")
    done = completed_operation(service, compaction["id"])
    assert (done["instant"], "commit") in completed(path)
    [attempt] = service.attempts(compaction["id"])
    assert attempt["figures"]["file_groups"] == attempt["figures"]["files_written"] > 0
    writer.reads_right()

    # Hudi's writer goes on: an upsert into a compacted file group and a new key, recorded
    writer.write("upsert", [("k1", 40, "p1", 11.0), ("k9", 40, "p0", 9.0)])
    writer.reads_right()
    [later] = [t for t, a in completed(path) if a == "deltacommit" and t > delta_commits[-1]]
    assert recorded_commits(engine, table["id"]).get(later) == ("deltacommit", False)
    table = service.get(f"/v1/tables/{table['id']}")
    assert table["delta_commits_since_compaction"] == 1
    assert table["last_commit_instant"] == later


def pending(path: Path, service: str) -> list[str]:
    """Instants of the compaction or clustering plans pending on the table."""
    timeline = HudiTable.open(str(path)).timeline()
    plans = (
        timeline.pending_compactions()
        if service == "compaction"
        else timeline.pending_clusterings()
    )
    return [instant.requested_time for instant in plans]


def pause(service: Service, table_id: int, paused: bool) -> None:
    """Hold (or release) the table's operations: what the writer delegates waits to run."""
    response = service.http.patch(f"/v1/tables/{table_id}", json={"paused": paused})
    assert response.status_code == 200, response.text


@DELEGATION_CASES
def test_hudi_delegates_its_compaction_and_clustering_plans_to_tms_and_writes_on(
    services: Services,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    release: HudiRelease,
    table_version: int,
) -> None:
    service = services.start("a", **RESIDENT_WORKER)  # no policies: it runs what Hudi hands over
    path = tmp_path / f"trips_v{table_version}"
    options = {
        **table_options(release, path, table_version),
        **service_manager_options(service),
        # the writer schedules a compaction every 2 delta commits; executing it goes to tms
        "hoodie.compact.inline": "true",
        "hoodie.compact.inline.max.delta.commits": "2",
    }
    hudi = hudi_spark(release)
    # released Hudi's client throws before its first request (service_manager_config)
    assert hudi.run(f"{service_manager_config.__name__}:give_defaults") == NO_DEFAULT[release]
    writer = Writer(hudi, path, options)

    # every inline schedule asks tms to run the pending plans, none yet: the table registers
    writer.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    table = registered(service, path)
    assert table is not None, "the table service manager client did not register the table"
    assert operations_of(service, table["id"], "compaction") == []
    pause(service, table["id"], True)

    writer.write("upsert", [("k1", 20, "p1", 1.5), ("k2", 20, "p0", 2.5)])
    [compaction_instant] = pending(path, "compaction")  # scheduled by Hudi, delegated
    [compaction] = operations_of(service, table["id"], "compaction")
    assert compaction["instant"] == compaction_instant
    assert compaction["status"] not in ("RUNNING", "COMPLETED")
    # Hudi's client sends its defaults for the deploy settings left unset (`spark:4g,4g`,
    # parallelism 100, user and queue `default`): tms takes the table's and the engine's,
    # so the resident worker runs what Hudi hands over
    assert (compaction["owner"], compaction["resource"], compaction["parallelism"]) == (
        None,
        None,
        None,
    )
    # the writer writes on while its plan waits; it asks again for the same plan: one operation
    writer.write("upsert", [("k1", 30, "p1", 3.5), ("k5", 30, "p1", 5.5)])
    assert [op["id"] for op in operations_of(service, table["id"], "compaction")] == [
        compaction["id"]
    ]
    pause(service, table["id"], False)
    completed_operation(service, compaction["id"])
    assert (compaction_instant, "commit") in completed(path)
    assert pending(path, "compaction") == []
    [attempt] = service.attempts(compaction["id"])  # tms's job compacted, not Hudi's writer
    assert attempt["figures"]["file_groups"] == attempt["figures"]["files_written"] > 0
    writer.reads_right()

    # a clustering plan of this write's small file groups, delegated; no compaction due
    pause(service, table["id"], True)
    no_compaction = {"hoodie.compact.inline.max.delta.commits": "50"}
    writer.write(
        "insert",
        [(f"k{i}", 40, f"p{i % 2}", float(i)) for i in range(10, 14)],
        **no_compaction,
        **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "1"},
    )
    [clustering_instant] = pending(path, "clustering")
    [clustering] = operations_of(service, table["id"], "clustering")
    assert clustering["instant"] == clustering_instant
    writer.write("insert", [("k20", 50, "p2", 20.0)], **no_compaction)  # a new file group
    pause(service, table["id"], False)
    completed_operation(service, clustering["id"])
    assert (clustering_instant, "replacecommit") in completed(path)
    [attempt] = service.attempts(clustering["id"])
    assert attempt["figures"]["file_groups"] > attempt["figures"]["files_written"] > 0
    writer.reads_right()

    # upserts into the clustered file groups, after tms's clustering
    writer.write("upsert", [("k1", 60, "p1", 1.0), ("k10", 60, "p0", 10.5)], **no_compaction)
    writer.reads_right()
    assert [op["status"] for op in service.operations(table_id=table["id"])] == [
        "COMPLETED",
        "COMPLETED",
    ]
