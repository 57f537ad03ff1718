"""Instant times the API takes: Hudi's 17 digits, the 14 of tables older than Hudi 0.10, and
the 20 of a version 6 table's metadata table (a delta commit's time and Hudi's 3-digit
suffix: its compactions are `<delta commit>001`), which a metadata compaction's job reports."""

from __future__ import annotations

import pytest

from tms.http.fields import check_instant


@pytest.mark.parametrize("value", ["20261127145829046", "20261127145829", "20261127145829046001"])
def test_hudis_instant_times_are_taken(value: str) -> None:
    assert check_instant(value) == value


@pytest.mark.parametrize(
    "value", ["2026112714582904", "202611271458290460", "2026112714582904600", "x" * 17, ""]
)
def test_other_values_are_refused_saying_what_is_expected(value: str) -> None:
    with pytest.raises(ValueError, match="17 digits yyyyMMddHHmmssSSS"):
        check_instant(value)
