"""The memory budget of a native Spark task (the folder it spills into is the table layer's:
`tms.hudi.memory.task_workdir`).

The budget travels as a Spark setting (`spark.tms.task.memory`), so that it reaches a job
whichever way it runs: the service's `TMS_TASK_MEMORY` becomes `--conf` on spark-submit and
a resident worker's session conf, an operation's `extra_params` may set its own, and a
cluster's `spark-defaults.conf` may set it for every job. Unset, it follows the memory Spark
gives Python workers (`spark.executor.pyspark.memory`, split between an executor's cores, a
quarter of each share for records: the rest is the interpreter, decoded blocks and Parquet's
buffers), else `DEFAULT_BUDGET`.

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
    "REMEDY",
    "SETTING",
    "TASK_ENVIRONMENT",
    "give_tasks_allocator_settings",
    "parse_size",
    "task_memory_budget",
    "task_memory_conf",
]

SETTING = "spark.tms.task.memory"
"""The Spark setting that gives the budget; the service's `TMS_TASK_MEMORY` sets it."""

DEFAULT_BUDGET = 1024 * 1024 * 1024
"""1 GiB when nothing says otherwise: under a quarter of the 3-4 GB executors that run four
tasks at once, with their Python workers in the memory overhead."""

REMEDY = (
    f"raise {SETTING} (TMS_TASK_MEMORY for every job, or the operation's extra_params "
    f"`{SETTING}`), and the executors' memory with it"
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


PYSPARK_SHARE = 4
"""Of a Python worker's share of `spark.executor.pyspark.memory`, the part records take."""


def task_memory_conf(setting: str | None) -> dict[str, str]:
    """The Spark setting for the service's `TMS_TASK_MEMORY` (none when it is unset)."""
    return {SETTING: setting} if setting else {}


def task_memory_budget(spark: Any) -> int:
    """The budget in bytes for the tasks of the job running on `spark`."""
    conf = spark.conf  # the session's: Spark's own settings, and any set on the session
    configured = conf.get(SETTING, None)
    if configured:
        return parse_size(configured)
    pyspark_memory = conf.get("spark.executor.pyspark.memory", None)
    if pyspark_memory:
        cores = int(conf.get("spark.executor.cores", "1") or 1)
        return max(16 * 1024 * 1024, parse_size(pyspark_memory) // max(1, cores) // PYSPARK_SHARE)
    return DEFAULT_BUDGET


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
