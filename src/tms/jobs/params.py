"""Planning parameters a job reads from its operation's `extra_params` (the non-`spark.*`
keys). Short names, or the Hudi config keys writers already use for the same thing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["BadJobInput", "schedule_kwargs"]


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


def schedule_kwargs(action: str, extra_params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for the action's `schedule_*` function; keys it does not know are
    ignored (writers send their whole config), values it cannot use raise `BadJobInput`."""
    kwargs: dict[str, Any] = {}
    for argument, (parse, keys) in _PARAMS.get(action, {}).items():
        for key in keys:
            if key in extra_params and extra_params[key] is not None:
                kwargs[argument] = parse(key, extra_params[key])
                break
    return kwargs
