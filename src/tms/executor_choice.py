"""Who runs a table service's plans: tms's own Spark tasks (`native`), Apache Hudi's own
table-service code in the same Spark job (`hudi`), or `auto`: native where it supports the
table, else Hudi's code. One vocabulary for the settings, the policies, the API and the job."""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["AUTO", "EXECUTORS", "HUDI", "NATIVE", "ExecutorChoice", "parse_executor"]

NATIVE: Final = "native"
HUDI: Final = "hudi"
AUTO: Final = "auto"
EXECUTORS: Final = (AUTO, NATIVE, HUDI)
"""The choices, the default first."""

ExecutorChoice = Literal["auto", "native", "hudi"]


def parse_executor(value: object) -> ExecutorChoice:
    """The choice `value` names (case and surrounding blanks ignored); ValueError naming the
    choices for anything else."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text == NATIVE:
        return NATIVE
    if text == HUDI:
        return HUDI
    if text == AUTO:
        return AUTO
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {value!r}")
