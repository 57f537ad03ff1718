"""`MARKERS<n>` files on storage, read by our marker reader (rollback, reconciliation, the
conflict checks): both marker forms together, and a hostile line refused before anything
acts on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tms.hudi.errors import UnsafePathError
from tms.hudi.files import timeline_markers
from tms.hudi.files.markers import Marker, MarkerType, create_marker, list_markers
from tms.hudi.storage import Storage

INSTANT = "20260101120000000"


def test_direct_and_timeline_server_markers_are_read_together(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    create_marker(storage, INSTANT, Marker("p=1", "a-0_0-1-0_x.parquet", MarkerType.CREATE))
    timeline_markers.write_marker_type(storage, INSTANT)
    timeline_markers.write_marker_file(
        storage,
        INSTANT,
        0,
        ["p=1/b-0_0-1-0_x.parquet.marker.MERGE", "c-0_0-1-0_x.parquet.marker.CREATE"],
    )
    timeline_markers.write_marker_file(
        storage, INSTANT, 7, ["p=2/.d-0_x.log.1_0-1-0.marker.APPEND"]
    )
    found = sorted(m.name for m in list_markers(storage, INSTANT))
    assert found == [
        "c-0_0-1-0_x.parquet.marker.CREATE",
        "p=1/a-0_0-1-0_x.parquet.marker.CREATE",
        "p=1/b-0_0-1-0_x.parquet.marker.MERGE",
        "p=2/.d-0_x.log.1_0-1-0.marker.APPEND",
    ]
    assert timeline_markers.read_marker_type(storage, INSTANT) == "TIMELINE_SERVER_BASED"
    assert set(timeline_markers.read_marker_files(storage, INSTANT)) == {0, 7}


@pytest.mark.parametrize(
    "line",
    [
        "../../etc/passwd.marker.CREATE",
        "/etc/passwd.marker.CREATE",
        ".hoodie/hoodie.properties.marker.MERGE",
        "p/x.parquet.marker.REMOVE",
    ],
)
def test_a_marker_file_naming_a_file_outside_the_table_is_refused(
    tmp_path: Path, line: str
) -> None:
    storage = Storage(str(tmp_path / "t"))
    timeline_markers.write_marker_file(storage, INSTANT, 0, [line])
    with pytest.raises(UnsafePathError):
        list_markers(storage, INSTANT)
