"""A batch's write of a `MARKERS<n>` file that its request gave up on keeps the file until
storage answered, so no later batch races it; one that never started frees it at once."""

from __future__ import annotations

import threading

from tms.markers.state import _Write


def test_a_write_that_never_started_frees_its_file_at_once_and_never_runs() -> None:
    ran: list[str] = []
    freed: list[str] = []
    write = _Write(lambda: ran.append("write"))
    write.after(lambda: freed.append("freed"))
    assert freed == ["freed"]
    write()  # a storage thread that starts it late
    assert ran == [], "an abandoned write never touches storage"


def test_a_running_write_frees_its_file_only_once_storage_answered() -> None:
    started, answer = threading.Event(), threading.Event()
    freed = threading.Event()

    def slow_storage() -> None:
        started.set()
        assert answer.wait(60)

    write = _Write(slow_storage)
    thread = threading.Thread(target=write)
    thread.start()
    assert started.wait(60)
    write.after(freed.set)  # the request timed out while storage still writes
    assert not freed.is_set()
    answer.set()
    thread.join(60)
    assert freed.is_set()


def test_a_write_that_is_over_frees_its_file_at_once() -> None:
    write = _Write(lambda: None)
    write()
    freed: list[bool] = []
    write.after(lambda: freed.append(True))
    assert freed == [True]
