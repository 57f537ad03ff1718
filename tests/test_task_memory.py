"""The memory budget a job's native tasks get: the setting when there is one, else half a
Python worker's share of `spark.executor.pyspark.memory`, else 1 GiB; their records get it
less the Python worker's own baseline, seven tenths of the rest, at least 16 MiB."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tms.hudi.memory import read_spilled, task_workdir
from tms.spark_runtime.task_memory import (
    DEFAULT_BUDGET,
    DEFAULT_RECORDS,
    MIN_RECORDS,
    SETTING,
    TASK_ENVIRONMENT,
    WORKER_BASELINE,
    give_tasks_allocator_settings,
    parse_size,
    records_budget,
    task_memory_budget,
    worker_memory_budget,
)


class _Session:
    """A SparkSession's `conf` as the budget reads it (pure logic: no JVM needed)."""

    def __init__(self, **conf: str) -> None:
        self.conf = self
        self._values = conf

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)


def test_the_setting_wins_then_python_memory_per_core_then_the_default() -> None:
    assert worker_memory_budget(_Session(**{SETTING: "256m"})) == 256 * 2**20
    pyspark = {"spark.executor.pyspark.memory": "4g", "spark.executor.cores": "4"}
    assert worker_memory_budget(_Session(**pyspark)) == 512 * 2**20
    assert worker_memory_budget(_Session(**{**pyspark, SETTING: "2g"})) == 2 * 2**30
    assert worker_memory_budget(_Session()) == DEFAULT_BUDGET == 2**30


def test_a_tasks_records_get_the_budget_less_the_python_workers_own_memory() -> None:
    """A 256 MiB worker holds its interpreter and libraries (176 MiB) and 56 MiB of
    records; a budget under that baseline still leaves a task 16 MiB to spill from, and a
    budget under that is the records' whole (tests force spill paths with KiBs)."""
    assert task_memory_budget(_Session(**{SETTING: "256m"})) == int(80 * 2**20 * 0.7)
    assert task_memory_budget(_Session(**{SETTING: "1g"})) == DEFAULT_RECORDS
    assert DEFAULT_RECORDS == records_budget(2**30) == int(848 * 2**20 * 0.7)
    assert task_memory_budget(_Session(**{SETTING: "16m"})) == MIN_RECORDS == 16 * 2**20
    assert records_budget(WORKER_BASELINE) == MIN_RECORDS
    assert task_memory_budget(_Session(**{SETTING: "16k"})) == 16 * 2**10
    sizes = [2**k for k in range(10, 34)]
    assert [records_budget(s) for s in sizes] == sorted(records_budget(s) for s in sizes)


@pytest.mark.parametrize(
    ("text", "size"),
    [("512m", 512 * 2**20), ("1g", 2**30), ("1024k", 2**20), ("65536", 65536), ("2GiB", 2**31)],
)
def test_sizes_read_as_spark_writes_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "1.5g", "-1m", "1x"])
def test_a_size_that_is_not_one_is_refused_saying_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="512m, 1g or a number of bytes"):
        parse_size(text)


def test_a_task_spills_under_sparks_local_folder_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path},/elsewhere")
    with task_workdir() as folder:
        assert Path(folder).parent == tmp_path
        (Path(folder) / "spill").write_bytes(b"x")
    assert list(tmp_path.iterdir()) == []


def _resident_file_pages() -> int:
    """Bytes of file pages mapped into this process (Linux: `RssFile`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_a_spilled_stream_is_read_without_mapping_its_file(tmp_path: Path) -> None:
    """pyarrow maps a stream it opens by path, and every page a merge touches then counts in
    the task's resident memory: a spilled stream is read through the file instead."""
    rows = pa.table({"v": pa.array(np.arange(8 * 1024 * 1024, dtype=np.int64))})  # 64 MiB
    path = tmp_path / "run.arrow"
    with pa.ipc.new_stream(str(path), rows.schema) as writer:
        writer.write_table(rows, max_chunksize=64 * 1024)
    del rows

    def touched_pages(reader: pa.ipc.RecordBatchStreamReader) -> int:
        before = _resident_file_pages()
        total = 0
        with reader:
            for batch in reader:
                total += int(pc.sum(batch.column(0)).as_py())
            grown = _resident_file_pages() - before
        assert total == (8 * 1024 * 1024) * (8 * 1024 * 1024 - 1) // 2
        return grown

    assert touched_pages(pa.ipc.open_stream(str(path))) > 32 * 1024 * 1024  # what pyarrow does
    assert touched_pages(read_spilled(path)) < 8 * 1024 * 1024


def test_the_table_layer_and_the_runtime_default_to_one_budget() -> None:
    from tms.hudi import memory

    assert memory.DEFAULT_RECORDS == DEFAULT_RECORDS


def _worker_environment(_: int) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in TASK_ENVIRONMENT}


@pytest.mark.spark
def test_the_python_workers_that_run_tasks_give_freed_memory_back_at_once(spark: Any) -> None:
    """The session `get_spark` makes ships the allocator's settings with each task."""
    seen = spark.sparkContext.parallelize([1, 2], 2).map(_worker_environment).collect()
    assert seen == [{"MIMALLOC_PURGE_DELAY": "0"}] * 2


def test_an_allocator_setting_the_job_gives_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    def session(environment: dict[str, str]) -> SimpleNamespace:
        return SimpleNamespace(sparkContext=SimpleNamespace(environment=environment))

    given = session({"MIMALLOC_PURGE_DELAY": "25"})  # spark.executorEnv.MIMALLOC_PURGE_DELAY
    give_tasks_allocator_settings(given)
    assert given.sparkContext.environment == {"MIMALLOC_PURGE_DELAY": "25"}
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "5")  # the job's own environment
    from_job = session({})
    give_tasks_allocator_settings(from_job)
    assert from_job.sparkContext.environment == {"MIMALLOC_PURGE_DELAY": "5"}
