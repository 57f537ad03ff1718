"""What each storage call costs on an object store, and who sees the counts."""

from __future__ import annotations

import threading

from tms.hudi.storage.requests import (
    TOTAL,
    RequestKind,
    counting,
    delete_requests,
    list_requests,
    put_requests,
    record,
)


def test_listings_and_batch_deletes_go_by_pages_of_a_thousand_keys() -> None:
    assert [list_requests(n) for n in (0, 1, 1000, 1001, 2500)] == [1, 1, 1, 2, 3]
    assert [delete_requests(n) for n in (0, 1, 1000, 1001)] == [0, 1, 1, 2]


def test_large_objects_are_written_as_multipart_uploads() -> None:
    mib = 2**20
    assert put_requests(0) == 1
    assert put_requests(100 * mib - 1) == 1
    # create, two 50 MiB parts, complete
    assert put_requests(100 * mib) == 4
    assert put_requests(120 * mib) == 5


def test_nested_blocks_each_count_what_ran_inside_them() -> None:
    before = TOTAL[RequestKind.GET]
    with counting() as outer:
        record(RequestKind.GET)
        with counting() as inner:
            record(RequestKind.LIST, 2)
        record(RequestKind.PUT)
    record(RequestKind.DELETE)
    assert outer.as_dict() == {"LIST": 2, "HEAD": 0, "GET": 1, "PUT": 1, "DELETE": 0}
    assert inner.as_dict() == {"LIST": 2, "HEAD": 0, "GET": 0, "PUT": 0, "DELETE": 0}
    assert TOTAL[RequestKind.GET] == before + 1


def test_a_block_does_not_count_another_threads_work() -> None:
    """A heartbeat thread's beats are not part of the work that runs beside it."""
    with counting() as counts:
        beat = threading.Thread(target=record, args=(RequestKind.PUT,))
        beat.start()
        beat.join()
        record(RequestKind.GET)
    assert counts.total == 1 and counts[RequestKind.GET] == 1
