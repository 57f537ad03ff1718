"""A table's `triggers` (its policy JSON) parsed into conditions, one per action.

The grammar, chosen so that a spec reads as what it means and every mistake has one place::

    triggers  := {<action>: condition, ...}     compaction, logcompaction, clustering,
                                                clean, metadata-compaction, archival,
                                                partition_ttl
    condition := {"any": [condition, ...]}      due when one part is
               | {"all": [condition, ...]}      due when every part is
               | {<strategy>: <parameters>}     a name of `registry.STRATEGIES`

Each condition is an object with exactly one key, so `{"delta_commits": 5}` is the whole
of a strategy with its threshold, and an error's path (`compaction.any.1.elapsed_hours`)
names the value at fault. The API refuses a bad spec with that path; the same parser reads
stored policies, so what was accepted is what runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tms.policies.combinators import AllOf, AnyOf
from tms.policies.strategy import Condition, Path, SpecError
from tms.policies.strategy_names import STRATEGIES
from tms.store import ServiceAction

__all__ = ["MAX_DEPTH", "MAX_PARTS", "TRIGGER_ACTIONS", "parse_condition", "parse_triggers"]

TRIGGER_ACTIONS = (
    ServiceAction.COMPACTION,
    ServiceAction.LOG_COMPACTION,
    ServiceAction.CLUSTERING,
    ServiceAction.CLEAN,
    ServiceAction.METADATA_COMPACTION,
    ServiceAction.ARCHIVAL,
    ServiceAction.PARTITION_TTL,
)
"""The actions triggers create, in the order they are created (indexing only on request;
partition TTL only for a table whose policy sets its `ttl_days`)."""

MAX_DEPTH = 4
"""Combinators nest at most this deep."""
MAX_PARTS = 16
"""Parts of one `any` or `all`."""

_COMBINATORS: dict[str, type[AnyOf] | type[AllOf]] = {"any": AnyOf, "all": AllOf}
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.\- ]{1,40}")


def _shown(key: object) -> str:
    """A key as messages may quote it: only plain short names (never arbitrary input, which
    could hold text a JSON response cannot carry)."""
    return f" {key!r}" if isinstance(key, str) and _SAFE_KEY.fullmatch(key) else ""


def parse_triggers(value: Any) -> dict[ServiceAction, Condition]:
    """The conditions of a `triggers` object, by action; `SpecError` for the first problem."""
    actions = ", ".join(a.value for a in TRIGGER_ACTIONS)
    if not isinstance(value, Mapping):
        raise SpecError((), f"expected an object of actions ({actions}) to trigger specs")
    conditions: dict[ServiceAction, Condition] = {}
    for key, spec in value.items():
        action = next((a for a in TRIGGER_ACTIONS if a.value == key), None)
        if action is None:
            raise SpecError((), f"unknown action{_shown(key)}; expected one of {actions}")
        conditions[action] = parse_condition(spec, action, (key,))
    return conditions


def parse_condition(value: Any, action: ServiceAction, path: Path, depth: int = 0) -> Condition:
    """One condition for `action` at `path` (see the module doc for the grammar)."""
    names = ", ".join(STRATEGIES)
    if not isinstance(value, Mapping) or len(value) != 1:
        raise SpecError(path, f"expected an object with one key: any, all, or a strategy ({names})")
    ((key, params),) = value.items()
    combinator = _COMBINATORS.get(key)
    if combinator is not None:
        here = (*path, key)
        if depth >= MAX_DEPTH:
            raise SpecError(here, f"any and all nest at most {MAX_DEPTH} deep")
        if not isinstance(params, list) or not 1 <= len(params) <= MAX_PARTS:
            raise SpecError(here, f"expected a list of 1 to {MAX_PARTS} trigger specs")
        parts = tuple(
            parse_condition(part, action, (*here, i), depth + 1) for i, part in enumerate(params)
        )
        return combinator(parts)
    strategy = STRATEGIES.get(key)
    if strategy is None:
        raise SpecError(path, f"unknown strategy{_shown(key)}; expected any, all, or {names}")
    if action not in strategy.actions:
        allowed = ", ".join(a.value for a in TRIGGER_ACTIONS if a in strategy.actions)
        raise SpecError((*path, key), f"{key} does not apply to {action.value} (only {allowed})")
    return strategy.parse(params, action, (*path, key))
