"""Planning parameters a job reads from its operation's `extra_params` (the non-`spark.*`
keys). Short names, or the Hudi config keys writers already use for the same thing.

The API refuses keys that are neither Spark settings nor planning parameters of any action
(a typo would otherwise do nothing), and values the operation's action cannot use. A key of
another action is accepted and unused: Hudi's table-service-manager client sends one
configured set of parameters to its compaction, clustering and clean calls alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["PLANNING_KEYS", "BadJobInput", "planning_problems", "schedule_kwargs"]


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


def _columns(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [c.strip() for c in value.split(",") if c.strip()]
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return [c.strip() for c in value if c.strip()]
    raise BadJobInput(f"extra_params {name}: expected column names, got {value!r}")


def _policy(name: str, value: Any) -> str:
    return _str(name, value).upper()


_Parser = Callable[[str, Any], Any]
# action → keyword argument of its schedule function → (parser, accepted keys)
_PARAMS: dict[str, dict[str, tuple[_Parser, tuple[str, ...]]]] = {
    "compaction": {
        "strategy": (_str, ("strategy",)),
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
    },
}


PLANNING_KEYS: frozenset[str] = frozenset(
    key for arguments in _PARAMS.values() for _, keys in arguments.values() for key in keys
)
"""Every planning parameter key of any action."""


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
    return problems


def schedule_kwargs(action: str, extra_params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for the action's `schedule_*` function; keys it does not know are
    ignored (the API refuses them; rows stored before it did are still read), values it
    cannot use raise `BadJobInput`."""
    kwargs: dict[str, Any] = {}
    for argument, (parse, keys) in _PARAMS.get(action, {}).items():
        for key in keys:
            if key in extra_params and extra_params[key] is not None:
                kwargs[argument] = parse(key, extra_params[key])
                break
    return kwargs
