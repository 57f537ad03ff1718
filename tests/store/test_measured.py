"""`measured_of`: the latest measurement's column as the counting statements return it."""

from __future__ import annotations

from datetime import UTC, datetime

from tms.store import Measured
from tms.store.measured import measured_of

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_measurement_is_read_from_its_json_array_parsed_or_not() -> None:
    value = [AT.timestamp(), {"small_files": 3}, {"commits": 2}, None]
    expected = Measured(AT, {"small_files": 3}, {"commits": 2}, {})
    assert measured_of(value) == expected
    assert measured_of('[1772366400.0, {"small_files": 3}, {"commits": 2}, null]') == expected
    assert measured_of(["1772366400", {"small_files": 3}, {"commits": 2}, []]) == expected


def test_no_measurement_is_none() -> None:
    assert measured_of(None) is None
    assert measured_of([]) is None
    assert measured_of([True, {}, {}, {}]) is None
