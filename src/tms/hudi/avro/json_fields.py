"""Checked reads of single fields of timeline metadata, in Hudi's JSON or decoded Avro form.

Commit metadata and write stats come from files other writers produced (Java Hudi, hudi-rs,
old releases), so each field is checked as it is read and a bad one is reported by its JSON key,
rather than failing later far from the file. Counters follow Java primitives: null reads as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_long", "as_mapping", "as_optional_long", "as_optional_str", "as_str_list"]


def as_long(value: Any, key: str) -> int:
    """A Java ``long`` field: absent or null reads as 0; integral floats are accepted."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    return value


def as_optional_long(value: Any, key: str) -> int | None:
    """A Java ``Long`` field: null stays ``None``."""
    return None if value is None else as_long(value, key)


def as_optional_str(value: Any, key: str) -> str | None:
    """A Java ``String`` field: null stays ``None``."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{key}: expected a string, got {value!r}")


def as_str_list(value: Any, key: str) -> list[str]:
    """A ``List<String>`` field, copied."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a list of strings, got {value!r}")
    return list(value)


def as_mapping(value: Any, key: str) -> Mapping[str, Any]:
    """A JSON object (or Avro record or map)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: expected an object, got {value!r}")
    return value
