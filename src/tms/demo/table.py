"""The demo's table: a partitioned merge-on-read table of trips written with the project's
writer, and the commit callback a Hudi writer would post for each of its commits."""

from __future__ import annotations

import random
import shutil
from pathlib import Path, PurePosixPath

import pyarrow as pa

from tms.api_client import Json
from tms.demo.checks import DEMO_TABLE_NAME, check_base_path
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

__all__ = ["CITIES", "DemoWriter", "callback_payload", "data_files", "file_groups", "trips"]

CITIES = ("amsterdam", "berlin", "chennai", "denver")


def trips(ids: list[int], ts: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "uuid": [f"trip-{i:07d}" for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": [CITIES[i % len(CITIES)] for i in ids],
            "rider": [f"rider-{rng.randrange(500)}" for _ in ids],
            "fare": [round(rng.uniform(5, 90), 2) for _ in ids],
        }
    )


METADATA_PARTITIONS = ("files", "record_index")
"""The demo table's metadata table, when it has one: what the writer keeps on merge-on-read."""


def data_files(base_path: str) -> int:
    """Data files on storage (local or an object store), `.hoodie` left out."""
    return sum(
        1
        for info in Storage(base_path).walk_files("")
        if ".hoodie" not in PurePosixPath(info.path).parts and not info.name.startswith(".hoodie")
    )


def file_groups(base_path: str) -> int:
    return len(HudiTable.open(base_path).file_system_view().latest_file_slices())


def callback_payload(base_path: str, instant: str) -> Json:
    """What Hudi's `HoodieWriteCommitHttpCallback` posts for a commit: its write stats from
    the commit metadata, and `commitActionType`/`extraMetadata` as released writers
    serialise them (`{"present": true}`, the value lost)."""
    table = HudiTable.open(base_path)
    timeline = table.timeline()
    found = timeline.get(instant)
    if found is None:
        raise ValueError(f"{instant} is not on the timeline of {base_path}")
    metadata = timeline.commit_metadata(found)
    return {
        "commitTime": instant,
        "tableName": table.name,
        "basePath": base_path,
        "hoodieWriteStat": [stat.to_json_dict() for _, stat in metadata.iter_write_stats()],
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
    }


class DemoWriter:
    """An insert, then upserts of a tenth of the trips, and a delete in the last commit."""

    def __init__(
        self,
        base_path: str,
        rows: int,
        total_commits: int,
        table_version: int = 6,
        metadata_table: bool = False,
    ) -> None:
        if "://" not in base_path:
            check_base_path(Path(base_path))  # never another table, nor someone's files
            shutil.rmtree(base_path, ignore_errors=True)
        table = create_table(
            base_path,
            DEMO_TABLE_NAME,
            record_key_fields=["uuid"],
            ordering_field="ts",
            partition_fields=["city"],
            table_version=table_version,
            metadata_partitions=METADATA_PARTITIONS if metadata_table else (),
        )
        self.writer = HudiWriter(table, max_file_rows=max(rows // 16, 100))
        self.rows = rows
        self.total = total_commits
        self.made = 0
        self.rng = random.Random(42)

    def commit(self) -> tuple[str, str]:
        """Write the next commit; returns its instant and what it did."""
        self.made += 1
        if self.made == 1:
            instant = self.writer.insert(trips(list(range(self.rows)), 1, self.rng))
            return instant, f"inserted {self.rows:,} trips"
        if self.made == self.total:
            doomed = sorted(self.rng.sample(range(self.rows), self.rows // 50))
            batch = trips(doomed, self.made, self.rng).select(["uuid", "city"])
            return self.writer.delete(batch), f"deleted {len(doomed):,} trips"
        ids = sorted(self.rng.sample(range(self.rows), self.rows // 10))
        return self.writer.upsert(trips(ids, self.made, self.rng)), f"updated {len(ids):,} trips"
