"""The job runs each table service end to end on Spark, on both timeline layouts: plan
reported, plan executed, result reported, and hudi-rs reads the same table after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi.test_indexing import own_table, record_index_is_true
from tests.jobs.stub_api import spec_json, stub_api
from tests.jobs.test_runner import results, routes, run
from tests.services.test_clean import cow_with_versions
from tests.services.test_compaction import mor_table
from tests.services.test_index import hudi_rs_rows
from tms.hudi.table import HudiTable
from tms.jobs.runner import EXIT_OK

PARAMS: dict[str, dict[str, Any]] = {
    "compaction": {},
    "clustering": {},
    "clean": {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 1},
}


class SharedSpark:
    """The tests' SparkSession, which the job may not stop (the next test still needs it)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def stop(self) -> None:
        pass


@pytest.mark.spark
@pytest.mark.parametrize("action", sorted(PARAMS))
def test_the_job_schedules_and_executes_each_service(
    spark: Any, tmp_path: Path, table_version: int, action: str
) -> None:
    if action == "clean":  # copy-on-write upserts leave older file versions to clean
        base = cow_with_versions(tmp_path, upserts=2, table_version=table_version)
    else:  # merge-on-read with log files, in many small file groups
        base, _, _ = mor_table(tmp_path, max_file_rows=40, table_version=table_version)
    before = oracle.snapshot(base)
    slices_before = oracle.file_slices(base)

    spec = spec_json(base_path=base, action=action, extra_params=PARAMS[action])

    def session(_: Any, __: str) -> Any:
        return SharedSpark(spark)

    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=session)

    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "SUCCEEDED", result
    (reported,) = [call["instant"] for call in api.calls("POST /instant")]
    done = HudiTable.open(base).timeline().get(reported)
    assert done is not None and done.is_completed
    assert oracle.snapshot(base).equals(before)
    slices_after = oracle.file_slices(base)
    if action == "compaction":
        assert not [s for s in slices_after if s["log_files"]]
    elif action == "clustering":
        assert len(slices_after) < len(slices_before)
    else:
        assert slices_after == slices_before and result["figures"]["files_deleted"] > 0


@pytest.mark.spark
def test_the_job_builds_and_drops_an_index(spark: Any, tmp_path: Path) -> None:
    """`indexing` through the job on Spark: the plan it reports completes with the record
    index true to the file slices; a drop job then removes it, with no plan to report."""
    root = tmp_path / "t"
    own_table(root)
    before = hudi_rs_rows(root, tmp_path)

    def session(_: Any, __: str) -> Any:
        return SharedSpark(spark)

    build = spec_json(
        base_path=str(root), action="indexing", extra_params={"partitions": "record_index"}
    )
    with stub_api(routes(build)) as api:
        code, _ = run(api, spark_factory=session)
    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "SUCCEEDED", result
    (reported,) = [call["instant"] for call in api.calls("POST /instant")]
    done = HudiTable.open(str(root)).timeline().get(reported)
    assert done is not None and done.is_completed and done.action.value == "indexing"
    assert "record_index" in HudiTable.open(str(root)).config.metadata_partitions
    record_index_is_true(root)
    assert hudi_rs_rows(root, tmp_path) == before

    drop = spec_json(
        base_path=str(root),
        action="indexing",
        extra_params={"partitions": "record_index", "drop": "true"},
    )
    with stub_api(routes(drop)) as api:
        code, _ = run(api, spark_factory=session)
    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "SUCCEEDED", result
    assert not api.calls("POST /instant")
    assert "record_index" not in HudiTable.open(str(root)).config.metadata_partitions
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()
    assert hudi_rs_rows(root, tmp_path) == before
