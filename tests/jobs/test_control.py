"""`JobControl.hold()`: after it a cancel request is only recorded, before it a cancel wins;
a lost lease stops held work too. Threads meet on events and barriers, never on sleeps."""

from __future__ import annotations

import threading

import pytest

from tms.jobs.control import JobControl, JobStopped


class FakeSpark:
    """The part of a SparkSession a stop touches: `sparkContext.cancelAllJobs()`."""

    def __init__(self) -> None:
        self.sparkContext = self
        self.cancels = 0

    def cancelAllJobs(self) -> None:
        self.cancels += 1


def _control() -> tuple[JobControl, FakeSpark]:
    control, spark = JobControl(), FakeSpark()
    control.attach_spark(spark)
    return control, spark


def test_a_cancel_before_the_hold_stops_the_work_and_the_hold_refuses() -> None:
    control, spark = _control()
    control.request_cancel()
    assert control.cancelled.is_set() and control.stopping and spark.cancels == 1
    with pytest.raises(JobStopped, match="cancel requested"):
        control.hold("stage catch-up")
    assert control.held is None and not control.cancel_too_late.is_set()


def test_after_the_hold_a_cancel_is_only_recorded() -> None:
    control, spark = _control()
    control.hold("stage catch-up")
    control.request_cancel()
    control.request_cancel()  # every later heartbeat repeats it
    assert control.cancel_too_late.is_set() and control.cancel_requested
    assert not control.cancelled.is_set() and not control.stopping
    assert spark.cancels == 0
    control.check()  # does not raise: the work goes on
    assert control.held == "stage catch-up"


def test_a_second_hold_keeps_the_first_reason_and_never_raises() -> None:
    control, _ = _control()
    control.hold("stage catch-up")
    control.request_cancel()
    control.hold("stage complete")  # the service names its next stage: still held
    assert control.held == "stage catch-up" and control.cancel_too_late.is_set()


def test_a_lost_lease_stops_held_work() -> None:
    control, spark = _control()
    control.hold("stage catch-up")
    control.lose()
    assert spark.cancels == 1
    with pytest.raises(JobStopped, match="lease lost"):
        control.check()


def _race() -> tuple[JobControl, FakeSpark, bool]:
    """A hold and a cancel released together; whether the hold was refused."""
    control, spark = _control()
    start = threading.Barrier(2)
    refused = threading.Event()

    def hold() -> None:
        start.wait()
        try:
            control.hold("stage catch-up")
        except JobStopped:
            refused.set()

    def cancel() -> None:
        start.wait()
        control.request_cancel()

    threads = [threading.Thread(target=hold), threading.Thread(target=cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return control, spark, refused.is_set()


def test_hold_and_cancel_racing_end_in_one_consistent_state() -> None:
    """Whichever comes first wins, atomically: a cancel that stops and a hold that refuses,
    or a hold that took and a cancel recorded as too late; never both, never neither."""
    for _ in range(200):
        control, spark, refused = _race()
        if refused:
            assert control.cancelled.is_set() and spark.cancels == 1
            assert control.held is None and not control.cancel_too_late.is_set()
        else:
            assert control.held == "stage catch-up" and control.cancel_too_late.is_set()
            assert not control.cancelled.is_set() and spark.cancels == 0
