"""Trigger policies: turn stored commits into table service operations."""

from tms.policies.triggers import (
    POLICY_KEYS,
    Counters,
    Thresholds,
    Trigger,
    apply_triggers,
    due_actions,
    thresholds_for,
)

__all__ = [
    "POLICY_KEYS",
    "Counters",
    "Thresholds",
    "Trigger",
    "apply_triggers",
    "due_actions",
    "thresholds_for",
]
