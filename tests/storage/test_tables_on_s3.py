"""Real Hudi tables copied into a real S3 endpoint read the same as their local copies: our
timeline and latest file slices, and hudi-rs's rows through its own S3 options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi import HudiTable as OracleTable
from tests.hudi.test_fixture_views import rows_of, unzip_fixture
from tests.storage.conftest import S3Endpoint, upload
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY
from tms.hudi.storage.requests import counting
from tms.hudi.table import HudiTable
from tms.services.table_refusals import unsupported_features

FIXTURES = ["cow_v8_nonpartitioned", "mor_avro_v9_txns_simple_meta"]


def oracle_rows(base_path: str, options: dict[str, str] | None = None) -> pa.Table:
    """hudi-rs's snapshot: record key and data columns, sorted by record key."""
    rows = pa.Table.from_batches(OracleTable(base_path, options).read())
    keep = [RECORD_KEY] + [c for c in rows.column_names if c not in META_FIELDS]
    return rows.select(keep).sort_by(RECORD_KEY)


@pytest.fixture(scope="module", params=FIXTURES)
def copies(
    request: pytest.FixtureRequest, s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """A fixture table unzipped locally and the same files in the bucket."""
    local = unzip_fixture(request.param, tmp_path_factory.mktemp(request.param))
    return local, upload(local, s3, request.param)


def summary(table: HudiTable) -> tuple[list[Any], list[dict[str, Any]]]:
    timeline = table.timeline()
    instants = [(i.requested_time, i.action, i.state, i.completion_time) for i in timeline.instants]
    return instants, rows_of(table.file_system_view(timeline).latest_file_slices())


def test_timeline_and_latest_slices_on_s3_equal_the_local_copy(
    copies: tuple[Path, str], s3: S3Endpoint
) -> None:
    local, remote = copies
    on_s3 = HudiTable.open(remote, storage_options=s3.storage_options)
    instants, slices = summary(on_s3)
    assert instants and slices
    assert (instants, slices) == summary(HudiTable.open(str(local)))
    assert not unsupported_features(on_s3)


def test_the_table_opens_from_the_environment_alone(copies: tuple[Path, str]) -> None:
    """No storage options: the endpoint and keys come from `AWS_*` variables, as in a job."""
    local, remote = copies
    assert summary(HudiTable.open(remote)) == summary(HudiTable.open(str(local)))


def test_hudi_rs_reads_the_same_rows_from_s3(copies: tuple[Path, str], s3: S3Endpoint) -> None:
    local, remote = copies
    expected = oracle_rows(str(local))
    assert expected.num_rows > 0
    assert oracle_rows(remote, s3.hudi_rs_options).equals(expected)


def test_opening_a_table_and_loading_its_timeline_costs_three_requests(
    s3: S3Endpoint, tmp_path: Path
) -> None:
    """One GET of `hoodie.properties` (no existence check first), one LIST of the timeline
    folder (fewer than 1,000 instant files), and nothing more: the reads a pull pays for."""
    local = unzip_fixture("cow_v8_nonpartitioned", tmp_path)
    remote = upload(local, s3, "counted")
    for base_path in (str(local), remote):
        with counting() as counts:
            HudiTable.open(base_path).timeline()
        assert counts.as_dict() == {"LIST": 1, "HEAD": 0, "GET": 1, "PUT": 0, "DELETE": 0}
