"""Apache Hudi's Spark writer with tms as its timeline server: the remote file-system view
(`REMOTE_FIRST`, embedded timeline server off) and timeline-server-based markers on a real
`tms serve`.

- Hudi's writer inserts, upserts and deletes on copy-on-write and merge-on-read tables, with
  its own clean or compaction planning on the view; the writes commit and Hudi reads back
  the rows the test's model expects. The writer never falls back to its own view or to
  direct markers where tms serves the call: Hudi logs each fallback
  (`PriorityBasedFileSystemView`: "Got error running preferred function", then "Routing
  request to secondary"; `WriteMarkersFactory`: "Falling back to direct markers"), counted in
  the Hudi child's log; tms's answers other than 2xx are counted on its `/metrics`, where it
  must also have answered view and marker calls (so nothing passes served locally).
- Two writers with optimistic concurrency and early conflict detection on tms's markers.
- The view's timeline calls answer as Hudi's own timeline server does on the same table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Service, Services, services
from tests.hudi_java.concurrent_writers import holding_options
from tests.hudi_java.support import HUDI_0_15, HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.writer_options import OPTIMISTIC_CONCURRENCY, REMOTE_VIEW_AND_MARKERS, filled

__all__ = ["services"]  # the e2e fixture: a real `tms serve`

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
SCHEMA = "key string, ts long, part string, val double"
COLUMNS = ["key", "ts", "part", "val"]
INSERT = [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)]
UPSERT = [("k1", 20, "p1", 1.5), ("k2", 20, "p0", 2.5), ("k8", 10, "p2", 8.0)]
DELETE = [("k3", 30, "p1", 0.0)]

FALLBACKS = re.compile(
    r"Got error running preferred function|Routing request to secondary"
    r"|Falling back to direct markers"
)
"""What Hudi logs when it serves a call itself instead of asking the timeline server."""


def remote_options(service: Service) -> dict[str, str]:
    """The writer's options that make tms its timeline server (file-system view, markers)."""
    return filled(REMOTE_VIEW_AND_MARKERS, tms_host="127.0.0.1", tms_port=service.port)


def table_options(
    release: HudiRelease, path: Path, table_type: str, table_version: int
) -> dict[str, str]:
    return {
        **keyed_table(path.name, table_type),
        **release.write_options(table_version),
    }


class LogWatch:
    """The lines a Hudi child logs from now on."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.start = log.stat().st_size if log.exists() else 0

    def lines(self) -> list[str]:
        with self.log.open("rb") as handle:
            handle.seek(self.start)
            return handle.read().decode(errors="replace").splitlines()

    def fallbacks(self) -> list[str]:
        return [line for line in self.lines() if FALLBACKS.search(line)]


def metric_samples(service: Service) -> dict[str, float]:
    """`/metrics` as {"name{labels}": value}."""
    text = service.http.get("/metrics").text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    found = 0.0
    for key, value in samples.items():
        if key != name and not key.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in key for k, v in labels.items()):
            found += value
    return found


def refused_timeline_server_calls(samples: dict[str, float]) -> dict[str, float]:
    """tms's answers to the view and marker routes that were not 2xx."""
    return {
        key: value
        for key, value in samples.items()
        if key.startswith("tms_http_requests_total{")
        and "/v1/hoodie/" in key
        and not re.search(r'status="2\d\d"', key)
        and value
    }


@pytest.fixture
def tms(services: Services) -> Iterator[Service]:
    yield services.start("view")


def register(service: Service, path: Path) -> None:
    """Register the table before Hudi creates it, so tms answers its first write."""
    response = service.http.post(
        "/v1/tables",
        params={"pending": "true"},
        json={"db_name": "default", "table_name": path.name, "base_path": str(path)},
    )
    assert response.status_code in (200, 201), response.text


CASES = [
    (HUDI_1_2, 9, "MERGE_ON_READ"),
    (HUDI_1_2, 6, "MERGE_ON_READ"),
    (HUDI_0_15, 6, "COPY_ON_WRITE"),
]
"""Copy-on-write at version 9 is written through tms by the concurrency test below."""

TABLE_SERVICES = {
    "COPY_ON_WRITE": {
        "hoodie.clean.commits.retained": "1",
        "hoodie.cleaner.commits.retained": "1",  # its name before 1.0
    },
    "MERGE_ON_READ": {
        "hoodie.compact.inline": "true",
        "hoodie.compact.inline.max.delta.commits": "2",
    },
}
"""The writer's own table services, which plan on the remote view too: a clean after each
write (copy-on-write), a compaction every 2 delta commits (merge-on-read)."""
SERVICE_ACTION = {"COPY_ON_WRITE": "clean", "MERGE_ON_READ": "commit"}
"""What the timeline shows of them (a compaction completes as a commit)."""


@pytest.mark.parametrize(
    ("release", "table_version", "table_type"),
    CASES,
    ids=[f"hudi-{r.version}-v{v}-{t.lower()}" for r, v, t in CASES],
)
def test_hudi_writes_with_tms_as_its_timeline_server(
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tms: Service,
    tmp_path: Path,
    release: HudiRelease,
    table_version: int,
    table_type: str,
) -> None:
    hudi = hudi_spark(release)
    path = tmp_path / f"{table_type.lower()}_v{table_version}"
    register(tms, path)
    watch = LogWatch(hudi.log)
    options = {
        **table_options(release, path, table_type, table_version),
        **remote_options(tms),
        **TABLE_SERVICES[table_type],
    }
    model = {}

    def write(rows: list[Row], operation: str) -> None:
        hudi.write(path, rows, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})
        for row in rows:
            if operation == "delete":
                model.pop(row[0])
            else:
                model[row[0]] = row

    write(INSERT, "insert")
    write(UPSERT, "upsert")
    write(DELETE, "delete")

    assert hudi.read(path, COLUMNS) == sorted(model.values())
    samples = metric_samples(tms)  # before the test's own call below
    timeline = tms.get("/v1/hoodie/view/timeline/instants/all", basepath=str(path))
    assert SERVICE_ACTION[table_type] in {i["action"] for i in timeline["instants"]}
    assert refused_timeline_server_calls(samples) == {}
    fallbacks = watch.fallbacks()
    if release is HUDI_0_15:
        # Hudi before 1.0 keeps timeline-server markers for its embedded server: with it
        # off, its WriteMarkersFactory writes direct markers whatever the view's server
        fallbacks = [line for line in fallbacks if "Falling back to direct markers" not in line]
    assert fallbacks == []
    assert total(samples, "tms_view_requests_total") > 0
    if release is HUDI_0_15:
        assert total(samples, "tms_markers_created_total") == 0
    else:
        assert total(samples, "tms_markers_created_total") > 0


OCC = OPTIMISTIC_CONCURRENCY
"""Optimistic concurrency with a lock both writers share and early conflict detection, which
Hudi asks of the timeline server that holds the markers."""


def test_two_hudi_writers_with_early_conflict_detection_on_tms(
    hudi_spark: Callable[[HudiRelease], HudiSpark], tms: Service, tmp_path: Path
) -> None:
    """Disjoint file groups: both commit. Overlapping: the writer that started second is
    refused its marker while the first, inflight with a live heartbeat, has its markers on
    tms, and aborts with Hudi's early-conflict exception; the first's rows stand."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "cow_occ"
    register(tms, path)
    watch = LogWatch(hudi.log)
    options = {
        **table_options(HUDI_1_2, path, "COPY_ON_WRITE", 9),
        **remote_options(tms),
        **OCC,
        "hoodie.datasource.write.operation": "upsert",
    }
    hudi.write(path, INSERT, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    model = {row[0]: row for row in INSERT}

    def both(first: list[Row], second: list[Row], step: str) -> dict[str, str | None]:
        held = tmp_path / f"{step}.held"
        go = tmp_path / f"{step}.go"
        outcome: dict[str, str | None] = hudi.run(
            "tests.hudi_java.concurrent_writers:write_while_held",
            str(path),
            SCHEMA,
            (first, {**options, **holding_options(held, go)}),
            (second, options),
            str(held),
            str(go),
        )
        return outcome

    # p0 and p1 are one file group each: the first writer upserts into p0's
    first = [("k0", 50, "p0", 0.5)]
    disjoint = [("k1", 50, "p1", 1.25)]
    assert both(first, disjoint, "disjoint") == {"first": None, "second": None}
    model.update({row[0]: row for row in first + disjoint})
    assert hudi.read(path, COLUMNS) == sorted(model.values())

    first = [("k2", 60, "p0", 2.5)]
    overlapping = [("k4", 60, "p0", 4.5), ("k5", 60, "p1", 5.5)]
    outcome = both(first, overlapping, "overlapping")
    assert outcome["first"] is None
    assert "HoodieEarlyConflictDetectionException" in (outcome["second"] or ""), outcome
    model.update({row[0]: row for row in first})
    assert hudi.read(path, COLUMNS) == sorted(model.values())

    samples = metric_samples(tms)
    assert total(samples, "tms_marker_conflicts_total") == 1
    assert watch.fallbacks() == []
    assert refused_timeline_server_calls(samples) == {}


@pytest.fixture
def hudi_server(hudi_spark: Callable[[HudiRelease], HudiSpark]) -> Iterator[str]:
    """Hudi 1.x's own timeline server in the Hudi child: its base URL."""
    hudi = hudi_spark(HUDI_1_2)
    port = hudi.run("tests.hudi_java.hudi_timeline_service:start", 0)
    yield f"http://127.0.0.1:{port}"
    hudi.run("tests.hudi_java.hudi_timeline_service:stop", port)


FAILING_VALIDATOR = {
    "hoodie.precommit.validators": (
        "org.apache.hudi.client.validator.SqlQuerySingleResultPreCommitValidator"
    ),
    "hoodie.precommit.validators.single.value.sql.queries": (
        "select count(*) from <TABLE_NAME>#-1"
    ),
}
"""A pre-commit validation that fails: the write stays inflight, and the next write rolls it
back (Hudi's default eager rollback of failed writes)."""


def write_timeline_with_clean_and_rollback(hudi: HudiSpark, path: Path, table_version: int) -> None:
    """Commits, a clean (one commit retained) and a rollback of a failed write."""
    options = {
        **table_options(HUDI_1_2, path, "COPY_ON_WRITE", table_version),
        "hoodie.clean.commits.retained": "1",
        "hoodie.datasource.write.operation": "upsert",
    }
    hudi.write(path, INSERT, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    hudi.write(path, UPSERT, SCHEMA, options)
    hudi.write(path, [("k4", 40, "p0", 4.5)], SCHEMA, options)
    with pytest.raises(Exception, match="validation"):
        hudi.write(path, [("k5", 50, "p1", 5.5)], SCHEMA, {**options, **FAILING_VALIDATOR})
    hudi.write(path, [("k6", 60, "p0", 6.5)], SCHEMA, options)


@pytest.mark.parametrize(
    "table_version", [9, pytest.param(6, marks=pytest.mark.extended)], ids=["9", "6"]
)
def test_the_view_timeline_answers_as_hudis_own_timeline_server(
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    hudi_server: str,
    tms: Service,
    tmp_path: Path,
    table_version: int,
) -> None:
    """`timeline/instants/all` and `timeline/instant/last` give the view's timeline as Hudi's
    server holds it (`IncrementalTimelineSyncFileSystemView.getTimeline`: completed instants
    of every action and pending compactions), cleans and rollbacks included, not the write
    timeline that file groups carry; with Hudi 1.x's `requestedTime` and `completionTime`,
    which on version 6 is the completed instant file's modification time."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"cow_v{table_version}"
    register(tms, path)
    write_timeline_with_clean_and_rollback(hudi, path, table_version)

    params = {"basepath": str(path)}
    for call in ("timeline/instants/all", "timeline/instant/last"):
        theirs = httpx.get(f"{hudi_server}/v1/hoodie/view/{call}", params=params, timeout=60)
        ours = tms.http.get(f"/v1/hoodie/view/{call}", params=params)
        assert theirs.status_code == ours.status_code == 200, (call, theirs.text, ours.text)
        assert ours.json() == theirs.json(), call
    # the view's timeline, as Hudi's server holds it: every completed action, cleans and
    # rollbacks among them, not only the writes
    instants = tms.get("/v1/hoodie/view/timeline/instants/all", basepath=str(path))["instants"]
    assert {i["action"] for i in instants} == {"commit", "clean", "rollback"}
    assert all(i["completionTime"] > i["requestedTime"] for i in instants)
