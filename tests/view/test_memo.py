"""A snapshot keeps encoded answers for the many writers asking the same question, bounded
in count and in bytes so that a cached table's memory stays bounded."""

from __future__ import annotations

from typing import Any, cast

from tms.view import snapshot
from tms.view.snapshot import Snapshot


def empty_snapshot() -> Snapshot:
    return Snapshot(
        timeline=cast(Any, None),
        visible=[],
        hash="",
        groups={},
        replaced={},
        pending_compaction={},
        pending_log_compaction={},
        pending_clustering=[],
    )


def test_answers_past_the_byte_bound_leave_least_recently_asked_first(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(snapshot, "MEMO_BYTES", 100)
    view = empty_snapshot()
    view.remember("a", b"x" * 40)
    view.remember("b", b"x" * 40)
    assert view.memo("a") is not None  # asked again: "b" is now the least recent
    view.remember("c", b"x" * 40)
    assert view.memo("b") is None
    assert view.memo("a") is not None and view.memo("c") is not None
    assert view.answers_bytes == 80


def test_an_answer_larger_than_the_bound_is_not_kept(monkeypatch: Any) -> None:
    monkeypatch.setattr(snapshot, "MEMO_BYTES", 100)
    view = empty_snapshot()
    view.remember("small", b"x" * 10)
    view.remember("huge", b"x" * 101)
    assert view.memo("huge") is None
    assert view.memo("small") is not None


def test_answers_past_the_count_bound_leave(monkeypatch: Any) -> None:
    monkeypatch.setattr(snapshot, "MEMO_ANSWERS", 2)
    view = empty_snapshot()
    for key in ("a", "b", "c"):
        view.remember(key, b"{}")
    assert [k for k in ("a", "b", "c") if view.memo(k) is not None] == ["b", "c"]


def test_the_same_question_answered_again_is_counted_once() -> None:
    view = empty_snapshot()
    view.remember("a", b"x" * 10)
    view.remember("a", b"x" * 20)
    assert view.answers_bytes == 20
