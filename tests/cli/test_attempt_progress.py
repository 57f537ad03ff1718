"""`tms ops show` prints each attempt's last reported progress."""

from __future__ import annotations

from tms.cli.operations import _attempt_rows

ATTEMPT = {
    "number": 1,
    "outcome": None,
    "started_at": "2026-11-26T15:00:00Z",
    "duration_seconds": None,
    "exit_code": None,
    "instance_id": "i-1",
    "log_path": "/logs/1/1.log",
    "error": None,
}


def test_a_running_attempt_shows_its_stage_and_file_groups() -> None:
    progress = {"stage": "compacting", "file_groups_done": 2, "file_groups_planned": 4}
    (row,) = _attempt_rows([{**ATTEMPT, "progress": progress}])
    assert row["progress"] == "compacting 2/4"


def test_a_stage_without_counts_shows_the_stage_alone() -> None:
    (row,) = _attempt_rows([{**ATTEMPT, "progress": {"stage": "cleaning"}}])
    assert row["progress"] == "cleaning"


def test_no_progress_reported_shows_nothing() -> None:
    (row,) = _attempt_rows([{**ATTEMPT, "progress": None}])
    assert row["progress"] is None
