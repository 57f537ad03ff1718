"""The memory budget of a native Spark task (the folder it spills into is the table layer's:
`tms.hudi.memory.task_workdir`).

The budget is what one task's Python worker may hold, its interpreter and libraries included:
what a container that runs PySpark workers has to give each. The task's records get the
budget less what the worker holds before any record (`WORKER_BASELINE`), and seven tenths of
the rest (`RECORDS_SHARE`: decoded blocks, Parquet's buffers and Arrow's allocator's slack
come on top of the records a task counts), at least `MIN_RECORDS` or the whole budget when
it is smaller (`task_memory_budget`).

The budget travels as a Spark setting (`spark.tms.task.memory`), so that it reaches a job
whichever way it runs: the service's `TMS_TASK_MEMORY` becomes `--conf` on spark-submit and
a resident worker's session conf, an operation's `extra_params` may set its own, and a
cluster's `spark-defaults.conf` may set it for every job. Unset, it is half a Python worker's
share of `spark.executor.pyspark.memory` (split between an executor's cores), else
`DEFAULT_BUDGET`.

A task allocates and frees its parts faster than Arrow's allocator (mimalloc) gives freed
pages back by default (after a delay), so its Python workers are told to give them back at
once (`TASK_ENVIRONMENT`).
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RECORDS",
    "MIN_RECORDS",
    "RECORDS_SHARE",
    "REMEDY",
    "SETTING",
    "TASK_ENVIRONMENT",
    "WORKER_BASELINE",
    "give_tasks_allocator_settings",
    "parse_size",
    "records_budget",
    "task_memory_budget",
    "task_memory_conf",
    "worker_memory_budget",
]

SETTING = "spark.tms.task.memory"
"""The Spark setting that gives the budget; the service's `TMS_TASK_MEMORY` sets it."""

DEFAULT_BUDGET = 1024 * 1024 * 1024
"""1 GiB for a task's Python worker when nothing says otherwise: a quarter of the 4 GB
executors that run four tasks at once, with their Python workers in the memory overhead."""

WORKER_BASELINE = 176 * 1024 * 1024
"""What a task's Python worker holds before its first record: the interpreter, PySpark's
worker, pyarrow, polars and numpy (measured: 140-155 MB resident, `bench/RESULTS.md`), with
room for the pages the allocator keeps."""

RECORDS_SHARE = 0.7
"""Of the budget past `WORKER_BASELINE`, the part a task's records may take: the rest is for
what comes on top of the records it counts, the most of it the key filter and hashes of a
large slice's logs, a split clustering group's shuffle pieces and the row group on its way
to storage (measured at a 256 MiB budget: a worker over its baseline by 1.15 times the
records it counted compacting a slice of 1 million rows, 1.6 times at 30 million, 1.9 times
clustering a 0.5 GB group, `bench/RESULTS.md`)."""

MIN_RECORDS = 16 * 1024 * 1024
"""The records of a task whose budget leaves less than this get this much, or the whole
budget when it is smaller: a budget under the worker's own baseline cannot be kept, and such
a task spills as much as it can (tests give tasks KiBs to force every spill path)."""

REMEDY = (
    f"raise {SETTING} (TMS_TASK_MEMORY for every job, or the operation's extra_params "
    f"`{SETTING}`; a task's records get it less {WORKER_BASELINE // 2**20} MiB for the "
    f"Python worker itself, {RECORDS_SHARE:.0%} of the rest), and the executors' memory "
    "with it"
)
"""What a user can do about a task over its budget (`TaskMemoryExceeded.with_remedy`)."""

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """Bytes of a size as Spark writes them: `512m`, `1g`, `1024k`, `1073741824` (bytes)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size such as 512m, 1g or a number of bytes")
    return int(match[1]) * _UNITS[match[2].lower()]


PYSPARK_SHARE = 2
"""Of a Python worker's share of `spark.executor.pyspark.memory`, the part its budget takes
when no budget is set (PySpark's limit counts address space, which Arrow's allocator
reserves past what it uses)."""


def task_memory_conf(setting: str | None) -> dict[str, str]:
    """The Spark setting for the service's `TMS_TASK_MEMORY` (none when it is unset)."""
    return {SETTING: setting} if setting else {}


def worker_memory_budget(spark: Any) -> int:
    """The budget in bytes of a task's Python worker, for the job running on `spark`."""
    conf = spark.conf  # the session's: Spark's own settings, and any set on the session
    configured = conf.get(SETTING, None)
    if configured:
        return parse_size(configured)
    pyspark_memory = conf.get("spark.executor.pyspark.memory", None)
    if pyspark_memory:
        cores = int(conf.get("spark.executor.cores", "1") or 1)
        return parse_size(pyspark_memory) // max(1, cores) // PYSPARK_SHARE
    return DEFAULT_BUDGET


def records_budget(worker_budget: int) -> int:
    """The bytes of records a task may hold when its Python worker may hold
    `worker_budget`: the budget less the worker's own baseline, `RECORDS_SHARE` of the rest,
    at least `MIN_RECORDS` (or the budget itself, when smaller)."""
    floor = min(worker_budget, MIN_RECORDS)
    return max(floor, int((worker_budget - WORKER_BASELINE) * RECORDS_SHARE))


DEFAULT_RECORDS = records_budget(DEFAULT_BUDGET)
"""The records of a task of the default budget (what a task run with no Spark setting gets)."""


def task_memory_budget(spark: Any) -> int:
    """The bytes of records one native task of the job running on `spark` may hold at once
    (`records_budget` of `worker_memory_budget`): what the tasks spill past."""
    return records_budget(worker_memory_budget(spark))


TASK_ENVIRONMENT = {"MIMALLOC_PURGE_DELAY": "0"}
"""Set on the Python workers that run tasks: mimalloc returns freed pages at once instead of
after its purge delay (10 ms). A task frees and allocates parts of hundreds of MB a second,
so pages waiting out the delay added up to more than the budget itself: a split clustering
group's range task at a 256 MiB budget peaked at 811 MB resident, and at 559 MB with this,
for about 5 % more time (`bench/RESULTS.md`)."""


def give_tasks_allocator_settings(spark: Any) -> None:
    """Ship `TASK_ENVIRONMENT` with every Python function of `spark` (`sc.environment`, which
    PySpark sets on the workers that run them, locally and on executors alike). A value the
    job's own environment or `spark.executorEnv.*` gives is kept."""
    environment = spark.sparkContext.environment
    for name, value in TASK_ENVIRONMENT.items():
        environment.setdefault(name, os.environ.get(name, value))
