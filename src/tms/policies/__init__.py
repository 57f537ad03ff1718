"""Trigger policies: when stored commits (and time) make table services due.

Per table and action, a condition (a trigger strategy of `registry.STRATEGIES`, or `any` /
`all` of them, from the policy's `triggers`; else the commit count threshold) says when the
action is due; `tms.application.triggers` creates the operations that are.
"""

from tms.policies.combinators import AllOf, AnyOf
from tms.policies.defaults import (
    COUNT_KEYS,
    POLICY_KEYS,
    TRIGGER_KEYS,
    TTL_INTERVAL_HOURS,
    Thresholds,
    thresholds_for,
)
from tms.policies.spec import TRIGGER_ACTIONS, parse_condition, parse_triggers
from tms.policies.strategy import Condition, SpecError, Strategy
from tms.policies.strategy_names import STRATEGIES
from tms.policies.triggers import Trigger, conditions_for, due_triggers

__all__ = [
    "COUNT_KEYS",
    "POLICY_KEYS",
    "STRATEGIES",
    "TRIGGER_ACTIONS",
    "TRIGGER_KEYS",
    "TTL_INTERVAL_HOURS",
    "AllOf",
    "AnyOf",
    "Condition",
    "SpecError",
    "Strategy",
    "Thresholds",
    "Trigger",
    "conditions_for",
    "due_triggers",
    "parse_condition",
    "parse_triggers",
    "thresholds_for",
]
