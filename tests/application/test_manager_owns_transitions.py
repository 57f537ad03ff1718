"""An attempt's transitions are made in one place: `tms.application.manager`.

The store's statements that claim, launch, heartbeat, finish or reap an attempt are called by
`OperationManager` alone (and, for an attempt's end, by the rule it applies,
`application.attempt_end`); the `observe` functions that count those transitions by the
manager alone. The scheduler, the workers' and the jobs' routes go through it. A second
caller would be a second copy of a transition, free to drift (as the RUNNING count once did
between the scheduler and the workers' route). Likewise the store's statements that apply a
request's decision (a cancel, a removal, a retry) are called by `tms.application` alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tms"
MANAGER = SRC / "application" / "manager.py"
ATTEMPT_END = SRC / "application" / "attempt_end.py"

TRANSITION_STATEMENTS = frozenset(
    {
        "claim_due_operations",
        "claim_worker_operations",
        "complete_operation",
        "expired_lease_attempts",
        "extend_lease",
        "fail_attempt",
        "finish_attempt",
        "finish_cancelled",
        "invalidate_operation",
        "issue_attempt_token",
        "lock_running_operation",
        "lose_attempt",
        "reap_expired_leases",
        "record_engine",
        "record_executor_report",
        "record_first_heartbeat",
        "record_launch",
        "record_progress",
        "set_exit_code",
        "set_operation_instant",
        "worker_seen",
    }
)
"""The store's functions that move an attempt (or its operation) along its life."""
TRANSITION_COUNTS = frozenset({"attempts_claimed", "attempt_finished", "first_heartbeat"})
"""The `observe` functions that count those moves."""


def _names_used(path: Path) -> set[str]:
    """Every name a module imports or calls, by its last dotted part."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            used |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                used.add(func.id)
            elif isinstance(func, ast.Attribute):
                used.add(func.attr)
    return used


def callers_outside(owners: set[Path], names: frozenset[str]) -> dict[str, list[str]]:
    """Module -> the names of `names` it uses, for every module of `tms` but `owners`."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path in owners:
            continue
        hits = sorted(_names_used(path) & names)
        if hits:
            found[str(path.relative_to(SRC))] = hits
    return found


def test_only_the_manager_runs_an_attempts_transitions() -> None:
    store = set((SRC / "store").rglob("*.py"))
    assert callers_outside(store | {MANAGER, ATTEMPT_END}, TRANSITION_STATEMENTS) == {}


def test_only_the_manager_counts_an_attempts_transitions() -> None:
    assert callers_outside({SRC / "observe.py", MANAGER}, TRANSITION_COUNTS) == {}


REQUEST_STATEMENTS = frozenset(
    {
        "cancel_scheduled",
        "remove_operation",
        "request_cancel_of_running",
        "resubmit_cancelled",
        "retry_operation",
    }
)
"""The store's statements that apply what a request's use case decided."""


def test_only_the_application_applies_a_requests_decision() -> None:
    owners = set((SRC / "store").rglob("*.py")) | set((SRC / "application").rglob("*.py"))
    assert callers_outside(owners, REQUEST_STATEMENTS) == {}


REQUEST_USE_CASES = frozenset(
    {
        "apply_triggers",
        "cancel",
        "cancel_operation",
        "check_auto_register",
        "check_request",
        "register",
        "remove",
        "retry",
        "submit",
        "writer_table_names",
    }
)
"""The application's request use cases, which callers reach through `OperationManager`."""


def _application_imports(path: Path) -> set[str]:
    """The names a module imports from `tms.application` (the package or its modules)."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tms.application"):
            imported |= {alias.name for alias in node.names}
    return imported


def test_callers_reach_the_request_use_cases_through_the_manager() -> None:
    """The routes, ingest and the scheduler call `OperationManager`'s methods, never the use
    case functions themselves (the manager is the one place an operation changes)."""
    outside = {
        str(path.relative_to(SRC)): sorted(_application_imports(path) & REQUEST_USE_CASES)
        for path in sorted(SRC.rglob("*.py"))
        if (SRC / "application") not in path.parents
    }
    assert {module: names for module, names in outside.items() if names} == {}


def test_the_check_sees_a_second_caller(tmp_path: Path) -> None:
    """The scan finds a call by attribute and an import by name (so the checks above can
    fail)."""
    module = tmp_path / "second.py"
    module.write_text(
        "from tms.store import finish_attempt\nimport tms.store as s\ns.extend_lease(None)\n"
        "from tms.application.cancel import cancel\n"
    )
    assert _names_used(module) >= {"finish_attempt", "extend_lease"}
    assert _application_imports(module) == {"cancel"}
