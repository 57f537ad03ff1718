"""Planning parameters a job reads from its operation's `extra_params` (the non-`spark.*`
keys). Short names, or the Hudi config keys writers already use for the same thing.

The API refuses keys that are neither Spark settings nor planning parameters of any action
(a typo would otherwise do nothing), and values the operation's action cannot use. A key of
another action is accepted and unused: Hudi's table-service-manager client sends one
configured set of parameters to its compaction, clustering and clean calls alike. An action
may require one: `indexing` cannot plan without the metadata `partitions` to build or drop,
`partition_ttl` without its `ttl_days`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, PARTITION_STATS, RECORD_INDEX

__all__ = [
    "DEFAULT_LOG_BLOCKS_THRESHOLD",
    "DEFAULT_TTL_MAX_PARTITIONS",
    "INDEX_PARTITIONS",
    "MAX_TTL_DAYS",
    "PLANNING_KEYS",
    "BadJobInput",
    "index_partitions",
    "lock_settings",
    "planning_arguments",
    "planning_problems",
    "schedule_kwargs",
    "ttl_days",
    "ttl_patterns",
]

INDEX_PARTITIONS: tuple[str, ...] = (FILES, COLUMN_STATS, PARTITION_STATS, RECORD_INDEX)
"""Metadata partitions an `indexing` operation may build or drop."""
DEFAULT_LOG_BLOCKS_THRESHOLD = 5
"""Hudi's `hoodie.log.compaction.blocks.threshold`: a file slice is due for log compaction
with this many log blocks."""
DEFAULT_TTL_MAX_PARTITIONS = 1000
"""Hudi's `hoodie.partition.ttl.strategy.max.delete.partitions`: the most partitions one
partition TTL deletes."""
MAX_TTL_DAYS = 36_500
"""The longest partition TTL taken, in days (a hundred years)."""


class BadJobInput(ValueError):
    """A parameter the job cannot use; retrying the same operation cannot help."""


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise BadJobInput(f"extra_params {name}: expected an integer, got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadJobInput(f"extra_params {name}: expected an integer, got {value!r}") from None
    if number <= 0:
        raise BadJobInput(f"extra_params {name}: must be positive, got {number}")
    return number


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadJobInput(f"extra_params {name}: expected a non-empty string, got {value!r}")
    return value.strip()


def _names(name: str, value: Any, what: str) -> list[str]:
    """Names from a comma-separated string or a list of strings, blanks dropped."""
    if isinstance(value, str):
        return [c.strip() for c in value.split(",") if c.strip()]
    if isinstance(value, list | tuple) and all(isinstance(c, str) for c in value):
        return [c.strip() for c in value if c.strip()]
    raise BadJobInput(f"extra_params {name}: expected {what}, got {value!r}")


def _columns(name: str, value: Any) -> list[str]:
    return _names(name, value, "column names")


def _policy(name: str, value: Any) -> str:
    return _str(name, value).upper()


def _partitions(name: str, value: Any) -> tuple[str, ...]:
    """Metadata partition names, in the order given, each once (a repeat is folded)."""
    names = [n.lower() for n in _names(name, value, "metadata partition names")]
    unknown = [n for n in names if n not in INDEX_PARTITIONS]
    if unknown:
        raise BadJobInput(
            f"extra_params {name}: unknown metadata partition {', '.join(map(repr, unknown))}; "
            f"expected one or more of {', '.join(INDEX_PARTITIONS)}"
        )
    if not names:
        raise BadJobInput(
            f"extra_params {name}: expected one or more of {', '.join(INDEX_PARTITIONS)}"
        )
    return tuple(dict.fromkeys(names))


_TRUE = ("true", "1")
_FALSE = ("false", "0")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise BadJobInput(f"extra_params {name}: expected true or false (or 1 or 0), got {value!r}")


def _days(name: str, value: Any) -> int:
    days = _int(name, value)
    if days > MAX_TTL_DAYS:
        raise BadJobInput(f"extra_params {name}: must be at most {MAX_TTL_DAYS}, got {days}")
    return days


def _patterns(name: str, value: Any) -> tuple[str, ...]:
    """Glob patterns over partition paths, comma-separated or a list (none: every partition)."""
    return tuple(dict.fromkeys(_names(name, value, "glob patterns over partition paths")))


def ttl_days(value: Any) -> int:
    """A partition TTL in days, as the planning parameter takes it; `BadJobInput` otherwise."""
    parsed: int = _days("ttl_days", value)
    return parsed


def ttl_patterns(value: Any) -> tuple[str, ...]:
    """A partition TTL's partition filter, as the planning parameter takes it."""
    return _patterns("ttl_partitions", value)


def index_partitions(value: Any) -> tuple[str, ...]:
    """The metadata partitions an index request names (a comma-separated string or a list);
    `BadJobInput` for none or an unknown one."""
    return _partitions("partitions", value)


_Parser = Callable[[str, Any], Any]
# action → keyword argument of its schedule function → (parser, accepted keys)
_PARAMS: dict[str, dict[str, tuple[_Parser, tuple[str, ...]]]] = {
    "compaction": {
        "strategy": (_str, ("strategy",)),
        "cancellable": (_bool, ("cancellable",)),
    },
    "clustering": {
        "target_file_size": (
            _int,
            ("target_file_size", "hoodie.clustering.plan.strategy.target.file.max.bytes"),
        ),
        "small_file_limit": (
            _int,
            ("small_file_limit", "hoodie.clustering.plan.strategy.small.file.limit"),
        ),
        "max_bytes_per_group": (
            _int,
            ("max_bytes_per_group", "hoodie.clustering.plan.strategy.max.bytes.per.group"),
        ),
        "sort_columns": (
            _columns,
            ("sort_columns", "hoodie.clustering.plan.strategy.sort.columns"),
        ),
        "cancellable": (_bool, ("cancellable",)),
    },
    "clean": {
        "policy": (_policy, ("policy", "hoodie.cleaner.policy")),
        "retained": (
            _int,
            (
                "retained",
                "hoodie.cleaner.commits.retained",
                "hoodie.cleaner.fileversions.retained",
            ),
        ),
        "cancel_plans_after_hours": (_int, ("cancel_plans_after_hours",)),
        "cancel_plans_after_instants": (_int, ("cancel_plans_after_instants",)),
        "rollback_failed_writes": (_bool, ("rollback_failed_writes",)),
    },
    "indexing": {
        "partitions": (_partitions, ("partitions",)),
        "drop": (_bool, ("drop",)),
    },
    "logcompaction": {
        "log_blocks_threshold": (
            _int,
            ("log_blocks_threshold", "hoodie.log.compaction.blocks.threshold"),
        ),
    },
    "archival": {
        "keep_min": (_int, ("keep_min", "hoodie.keep.min.commits")),
        "keep_max": (_int, ("keep_max", "hoodie.keep.max.commits")),
    },
    "partition_ttl": {
        "ttl_days": (_days, ("ttl_days", "hoodie.partition.ttl.strategy.days.retain")),
        "ttl_partitions": (
            _patterns,
            ("ttl_partitions", "hoodie.partition.ttl.strategy.partition.selected"),
        ),
        "ttl_max_partitions": (
            _int,
            ("ttl_max_partitions", "hoodie.partition.ttl.strategy.max.delete.partitions"),
        ),
    },
}

_REQUIRED: dict[str, tuple[str, str]] = {
    "indexing": (
        "partitions",
        "partitions is required: the metadata partitions to build (or drop), one or more "
        f"of {', '.join(INDEX_PARTITIONS)}",
    ),
    "partition_ttl": (
        "ttl_days",
        "ttl_days is required: partitions whose last commit is older than this many days "
        "are deleted (or hoodie.partition.ttl.strategy.days.retain)",
    ),
}
"""Per action, the planning parameter it cannot plan without, and why."""


def _missing(action: str, argument: str, extra_params: Mapping[str, Any]) -> bool:
    """Whether none of the keys of the planning parameter `argument` is given."""
    _, keys = _PARAMS[action][argument]
    return all(extra_params.get(key) is None for key in keys)


def _lock_folder(name: str, value: Any) -> str:
    folder = _str(name, value).strip("/")
    if value.strip().startswith("/") or "://" in folder or ".." in folder.split("/"):
        raise BadJobInput(
            f"extra_params {name}: the lock folder is a path relative to the table's base path "
            f"inside it (such as .hoodie), got {value!r}"
        )
    return folder


def _minutes(name: str, value: Any) -> int:
    if str(value).strip() == "0":
        return 0
    return _int(name, value)


_LOCK: dict[str, tuple[_Parser, str]] = {
    "provider": (_str, "hoodie.write.lock.provider"),
    "folder": (_lock_folder, "hoodie.write.lock.filesystem.path"),
    "expire_minutes": (_minutes, "hoodie.write.lock.filesystem.expire"),
    "wait_ms": (_int, "hoodie.write.lock.wait_time_ms"),
}
"""How the table's writers lock it, in Hudi's keys: every action takes them (a table
policy sets them for all its operations)."""


def planning_arguments(action: str) -> tuple[str, ...]:
    """The keyword arguments the planner of `action` takes, as this module's one table of
    planning parameters names them (none for an action that plans without any)."""
    return tuple(_PARAMS.get(action, {}))


def lock_settings(extra_params: Mapping[str, Any]) -> dict[str, Any]:
    """The lock settings an operation carries, parsed; `BadJobInput` for unusable ones."""
    return {
        argument: parse(key, extra_params[key])
        for argument, (parse, key) in _LOCK.items()
        if extra_params.get(key) is not None
    }


PLANNING_KEYS: frozenset[str] = frozenset(
    key for arguments in _PARAMS.values() for _, keys in arguments.values() for key in keys
) | frozenset(key for _, key in _LOCK.values())
"""Every planning parameter key of any action, and the lock settings."""


def planning_problems(action: str, extra_params: Mapping[str, Any]) -> dict[str, str]:
    """Per non-`spark.*` key, a message saying why the operation cannot take it: not a
    planning parameter of any action, or a value `action` cannot use. Empty when all fit."""
    problems: dict[str, str] = {}
    for key in extra_params:
        if not key.startswith("spark.") and key not in PLANNING_KEYS:
            problems[key] = (
                f"{key} is not allowed: neither a Spark setting (spark.*) nor a planning "
                "parameter "
                f"({', '.join(sorted(k for k in PLANNING_KEYS if '.' not in k))} "
                "or their hoodie.* keys)"
            )
    for parse, keys in _PARAMS.get(action, {}).values():
        for key in keys:
            if extra_params.get(key) is None:
                continue
            try:
                parse(key, extra_params[key])
            except BadJobInput as exc:
                problems[key] = str(exc).removeprefix("extra_params ")
    for parse, key in _LOCK.values():
        if extra_params.get(key) is not None:
            try:
                parse(key, extra_params[key])
            except BadJobInput as exc:
                problems[key] = str(exc).removeprefix("extra_params ")
    required = _REQUIRED.get(action)
    if required is not None and _missing(action, required[0], extra_params):
        problems[required[0]] = required[1]
    if not problems:
        problems.update(_keep_order(action, extra_params))
    return problems


def schedule_kwargs(action: str, extra_params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for the action's `schedule_*` function; keys it does not know are
    ignored (the API refuses them; rows stored before it did are still read), values it
    cannot use and a missing required one raise `BadJobInput`."""
    required = _REQUIRED.get(action)
    if required is not None and _missing(action, required[0], extra_params):
        raise BadJobInput(f"extra_params {required[1]}")
    kwargs: dict[str, Any] = {}
    for argument, (parse, keys) in _PARAMS.get(action, {}).items():
        for key in keys:
            if key in extra_params and extra_params[key] is not None:
                kwargs[argument] = parse(key, extra_params[key])
                break
    return kwargs


def _keep_order(action: str, extra_params: Mapping[str, Any]) -> dict[str, str]:
    """archival's keep_max must be above its keep_min when both are given (Hudi refuses the
    pair otherwise); one given alone is compared with the table's other when the job runs."""
    if action != "archival":
        return {}
    kwargs = schedule_kwargs(action, extra_params)
    low, high = kwargs.get("keep_min"), kwargs.get("keep_max")
    if low is None or high is None or high > low:
        return {}
    keys = _PARAMS[action]["keep_max"][1]
    key = next(k for k in keys if extra_params.get(k) is not None)
    return {key: f"{key}: must be greater than keep_min ({high} is not above {low})"}
