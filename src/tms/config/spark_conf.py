"""Which Spark settings an operation may carry to `spark-submit` (its `extra_params`
`spark.*` keys, passed as `--conf`).

The job is a process this service starts, so a Spark setting that names a jar, a plugin, a
class, a Python executable, JVM options, a file or an environment variable would run a
writer's code as the service. Only tuning keys on an allow-list pass: exact keys, or
`prefix*` patterns. The built-in list holds sizes, counts, timeouts and switches only;
administrators replace it (`TMS_SPARK_CONF_ALLOWED`) or add to it
(`TMS_SPARK_CONF_ALLOWED_EXTRA`). An exact entry is taken as written (the administrator
chose it); a key admitted by a pattern must still name none of the things above, so
`spark.sql.adaptive.*` does not admit `spark.sql.adaptive.customCostEvaluatorClass`.

Pure: the API checks requests with it, the spark-submit engine checks again at launch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tms.config.settings import Settings
from tms.spark_runtime.task_memory import SETTING as TASK_MEMORY
from tms.spark_runtime.task_memory import parse_size

__all__ = [
    "DEFAULT_ALLOWED",
    "DEFAULT_ALLOW_LIST",
    "SPARK_PREFIX",
    "SparkConfAllowList",
    "allow_list",
    "is_spark_key",
    "value_problems",
]

SPARK_PREFIX = "spark."

DEFAULT_ALLOWED: tuple[str, ...] = (
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.driver.memory",
    "spark.driver.memoryOverhead",
    "spark.executor.cores",
    "spark.executor.heartbeatInterval",
    "spark.executor.instances",
    "spark.executor.memory",
    "spark.executor.memoryOverhead",
    "spark.default.parallelism",
    "spark.dynamicAllocation.enabled",
    "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors",
    "spark.dynamicAllocation.initialExecutors",
    "spark.dynamicAllocation.executorAllocationRatio",
    "spark.dynamicAllocation.executorIdleTimeout",
    "spark.dynamicAllocation.cachedExecutorIdleTimeout",
    "spark.dynamicAllocation.schedulerBacklogTimeout",
    "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout",
    "spark.dynamicAllocation.shuffleTracking.enabled",
    "spark.dynamicAllocation.shuffleTracking.timeout",
    "spark.kryoserializer.buffer",
    "spark.kryoserializer.buffer.max",
    "spark.locality.wait",
    "spark.log.level",
    "spark.memory.fraction",
    "spark.memory.storageFraction",
    "spark.memory.offHeap.enabled",
    "spark.memory.offHeap.size",
    "spark.network.timeout",
    "spark.rdd.compress",
    "spark.shuffle.compress",
    "spark.shuffle.spill.compress",
    "spark.speculation*",
    "spark.sql.adaptive.*",
    "spark.sql.shuffle.partitions",
    "spark.task.cpus",
    "spark.task.maxFailures",
    "spark.tms.task.memory",
)
"""Tuning keys writers may set: sizes, counts, fractions, timeouts and switches."""

_KEY = re.compile(r"^spark(\.[A-Za-z0-9_-]+)+$")
# Words that make a key name code, or where to find it. Checked on keys that a `prefix*`
# pattern admits (case-insensitive, anywhere in the key).
_DANGEROUS = (
    "agent",
    "archive",
    "class",
    "command",
    "dir",
    "env",
    "extension",
    "file",
    "jar",
    "java",
    "listener",
    "package",
    "path",
    "plugin",
    "python",
    "repositor",
    "script",
    "uri",
    "url",
)


def is_spark_key(key: str) -> bool:
    """A Spark setting (for `--conf`), as opposed to a planning parameter for the job."""
    return key.startswith(SPARK_PREFIX)


def _dangerous_word(key: str) -> str | None:
    lowered = key.lower()
    return next((word for word in _DANGEROUS if word in lowered), None)


@dataclass(frozen=True)
class SparkConfAllowList:
    """Exact keys and key prefixes (from `prefix*` entries) that may go to `--conf`."""

    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, entries: Iterable[str]) -> SparkConfAllowList:
        exact: set[str] = set()
        prefixes: list[str] = []
        for entry in entries:
            if entry.endswith("*"):
                prefixes.append(entry[:-1])
            else:
                exact.add(entry)
        return cls(frozenset(exact), tuple(sorted(set(prefixes))))

    def refusal(self, key: str) -> str | None:
        """Why the Spark setting `key` may not be passed on; None when it may."""
        if not _KEY.match(key):
            return "not a Spark setting name (spark. followed by letters, digits, . _ -)"
        if key in self.exact:
            return None
        if any(key.startswith(prefix) for prefix in self.prefixes):
            word = _dangerous_word(key)
            if word is None:
                return None
            return f"Spark settings that name a {word} are never accepted"
        return (
            "only Spark tuning settings on the allow-list are accepted "
            "(TMS_SPARK_CONF_ALLOWED, TMS_SPARK_CONF_ALLOWED_EXTRA)"
        )

    def refused(self, params: Mapping[str, Any]) -> dict[str, str]:
        """The `spark.*` keys of `params` that may not go to spark-submit, with the reason;
        other keys are planning parameters and not this list's business."""
        reasons = {key: self.refusal(key) for key in params if is_spark_key(key)}
        return {key: reason for key, reason in reasons.items() if reason is not None}


DEFAULT_ALLOW_LIST = SparkConfAllowList.of(DEFAULT_ALLOWED)


@lru_cache(maxsize=8)
def _cached(allowed: tuple[str, ...] | None, extra: tuple[str, ...]) -> SparkConfAllowList:
    return SparkConfAllowList.of((*(DEFAULT_ALLOWED if allowed is None else allowed), *extra))


def allow_list(settings: Settings) -> SparkConfAllowList:
    """The instance's allow-list: `spark_conf_allowed` (unset: `DEFAULT_ALLOWED`) plus
    `spark_conf_allowed_extra`."""
    return _cached(settings.spark_conf_allowed, settings.spark_conf_allowed_extra)


def value_problems(extra: Mapping[str, Any]) -> dict[str, str]:
    """Values of allowed keys that tms itself reads and that would fail the job: the task
    memory budget (`spark.tms.task.memory`) must be a size of at least 1m."""
    if TASK_MEMORY not in extra:
        return {}
    value = str(extra[TASK_MEMORY])
    try:
        if parse_size(value) >= 1024 * 1024:
            return {}
    except ValueError as exc:
        return {TASK_MEMORY: f"{TASK_MEMORY}: {exc}"}
    return {TASK_MEMORY: f"{TASK_MEMORY}: {value!r} is under 1m (a size such as 512m or 1g)"}
