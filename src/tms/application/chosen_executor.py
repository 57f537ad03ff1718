"""Which executor an operation asks for, decided once for every way operations are made:
the submit's own choice, else its table policy's `executor`, else the installation's
`TMS_EXECUTOR` (`auto` unless set)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tms.config import Settings
from tms.executor_choice import ExecutorChoice
from tms.policies.params import policy_executor

__all__ = ["chosen_executor"]


def chosen_executor(
    asked: ExecutorChoice | None, policy: Mapping[str, Any] | None, settings: Settings
) -> ExecutorChoice:
    """`asked` when given, else the table policy's choice, else the setting."""
    if asked is not None:
        return asked
    return policy_executor(policy or {}) or settings.executor
