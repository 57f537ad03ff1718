"""`tms tables add` on a table that is registered already.

Registration is idempotent: registering the same table again changes nothing and answers
with what is registered. So settings given to `add` that differ from the registered ones
would be silently dropped; instead the command compares them with the answer and refuses,
naming each difference and the command that changes it (`tms tables set`, `pause`,
`storage-options`). Settings not given are not compared.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from tms.api_client import Json
from tms.hudi.actions import action_named

__all__ = ["POLICY_FLAGS", "THRESHOLD_FLAGS", "Difference", "differences", "refusal"]

THRESHOLD_FLAGS = {
    "compaction_delta_commits": "--compaction-delta-commits",
    "clean_commits": "--clean-commits",
    "clustering_commits": "--clustering-commits",
    "log_compaction_delta_commits": "--log-compaction-delta-commits",
    "archival_commits": "--archival-commits",
    "ttl_interval_hours": "--ttl-interval-hours",
}
"""Policy thresholds the operator CLI sets, by their key in the API (compared with the
thresholds in effect)."""
POLICY_FLAGS = {
    "archival_keep_min": "--archival-keep-min",
    "archival_keep_max": "--archival-keep-max",
    "ttl_days": "--ttl-days",
    "ttl_partitions": "--ttl-partitions",
    "ttl_max_partitions": "--ttl-max-partitions",
}
"""Other table policy settings the operator CLI sets, by their policy key (compared with
the table's policy: unset is not the default)."""
_SET_FLAGS = {"owner": "--owner", "queue": "--queue", "priority": "--priority"}


@dataclass(frozen=True)
class Difference:
    """A setting given to `add` that the registered table does not have."""

    flag: str
    registered: str
    requested: str
    fix: str
    """Which command changes it: `set`, `pause` or `storage-options`."""


def _actions(value: Any) -> str:
    names = value.split(",") if isinstance(value, str) else value
    return ",".join(sorted({action_named(n) or n.strip() for n in names if n.strip()}))


def _shown(value: Any) -> str:
    """A setting as its flag takes it: `unset`, a list comma-separated, 24.0 as 24."""
    if value is None:
        return "unset"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def differences(table: Json, requested: dict[str, Any]) -> list[Difference]:
    """What `requested` (the settings given, by API key; `storage_options` as names) asks
    for that `table`, as the API answered, does not have."""
    found: list[Difference] = []
    for key, flag in _SET_FLAGS.items():
        if key in requested and requested[key] != table.get(key):
            found.append(Difference(flag, str(table.get(key)), str(requested[key]), "set"))
    if "enabled_actions" in requested:
        want, have = _actions(requested["enabled_actions"]), _actions(table["enabled_actions"])
        if want != have:
            found.append(Difference("--actions", have or "none", want, "set"))
    for key, flag in THRESHOLD_FLAGS.items():
        have = table["thresholds"][key]
        if key in requested and requested[key] != have:
            found.append(Difference(flag, _shown(have), _shown(requested[key]), "set"))
    for key, flag in POLICY_FLAGS.items():
        have = table["policy"].get(key)
        if key in requested and requested[key] != have:
            found.append(Difference(flag, _shown(have), _shown(requested[key]), "set"))
    if requested.get("paused") and not table["paused"]:
        found.append(Difference("--paused", "active", "paused", "pause"))
    if "storage_options" in requested:
        want = ", ".join(sorted(requested["storage_options"])) or "none"
        have = ", ".join(sorted(table["storage_options"])) or "none"
        if want != have:
            found.append(Difference("--storage-options", have, want, "storage-options"))
    return found


def refusal(name: str, table_id: int, found: list[Difference]) -> str:
    """One line: what differs, and the commands that change it."""
    what = ", ".join(f"{d.flag} {d.registered} (not {d.requested})" for d in found)
    ref = shlex.quote(name)
    fixes = []
    to_set = [d for d in found if d.fix == "set"]
    if to_set:
        flags = " ".join(f"{d.flag} {shlex.quote(d.requested)}" for d in to_set)
        fixes.append(f"tms tables set {ref} {flags}")
    if any(d.fix == "pause" for d in found):
        fixes.append(f"tms tables pause {ref}")
    if any(d.fix == "storage-options" for d in found):
        fixes.append(f"tms tables storage-options {ref} FILE")
    return (
        f"{name} is already registered (table {table_id}) with {what}; registering again "
        f"changes nothing: change it with {' and '.join(fixes)}"
    )
