"""A writer that crashed after the server stored its markers: rolling its instant back (as
`tms` does before a table service, as Hudi's rollback does from the same files) deletes
exactly the data files its `MARKERS<n>` files name, and the marker folder."""

from __future__ import annotations

from pathlib import Path

from tests.markers.conftest import Serve, Table, create
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.rollback import rollback_inflight


def test_a_crashed_writers_served_markers_roll_its_files_back(serve: Serve, table: Table) -> None:
    hudi = HudiTable.open(table.base_path)
    ts = new_instant_time(hudi.timeline().instants)
    requested = request(hudi.storage, hudi.config, ts, Action.DELTA_COMMIT)
    inflight = transition(hudi.storage, hudi.config, requested, State.INFLIGHT)
    (partition, file_id), *_ = table.file_groups()
    folder = Path(table.base_path) / partition if partition else Path(table.base_path)
    written = [f"{file_id}_0-1-0_{ts}.parquet", f"new-0_1-1-0_{ts}.parquet"]
    kept = sorted(p.name for p in folder.iterdir() if p.is_file())
    with serve() as client:
        for name, kind in zip(written, ("MERGE", "CREATE"), strict=True):
            path = f"{partition}/{name}" if partition else name
            assert create(client, table.marker_dir(ts), f"{path}.marker.{kind}") is True
            (folder / name).write_bytes(b"partial parquet")  # then the writer crashed
    result = rollback_inflight(HudiTable.open(table.base_path), inflight)
    assert result.rolled_back == ts
    expected = {f"{partition}/{n}" if partition else n for n in written}
    assert set(result.deleted_files) == expected
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == kept
    assert not (Path(table.base_path) / ".hoodie" / ".temp" / ts).exists()
    assert HudiTable.open(table.base_path).timeline().get(ts) is None
