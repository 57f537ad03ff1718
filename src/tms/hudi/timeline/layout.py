"""What differs between timeline layouts 1 and 2, in one place.

Layout 1 (table versions 6 and 7) keeps instants in `.hoodie/`, names a completed instant
`<requested>.<action>` and stores commit metadata as Jackson JSON. Layout 2 (versions 8 and
9, Hudi 1.x) keeps them in `.hoodie/<hoodie.timeline.path>/`, names a completed instant
`<requested>_<completion>.<action>` (Hudi's `InstantFileNameGeneratorV2`), stores commit
metadata as the Avro `HoodieCommitMetadata` / `HoodieReplaceCommitMetadata`
(`CommitMetadataSerDeV2`), requests clustering as a `clustering` instant, and names a log file
by the delta commit that wrote it. Requested and inflight file names, plans and clean and
rollback metadata (Avro in both) are the same in both layouts. Instant file names are written
and parsed in `timeline.instant`, below this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.properties import TableConfig
from tms.hudi.timeline.instant import Action, Instant, instant_file_name

__all__ = ["TimelineLayout"]


@dataclass(frozen=True)
class TimelineLayout:
    """The layout rules of one table's timeline."""

    version: int
    folder: str
    """Where instants live, relative to the base path."""

    @classmethod
    def of(cls, config: TableConfig) -> TimelineLayout:
        return cls(config.timeline_layout_version, config.timeline_path)

    @property
    def names_completion_time(self) -> bool:
        """Completed instants carry their completion time in the file name."""
        return self.version >= 2

    @property
    def clustering_action(self) -> Action:
        """The action a clustering is requested as: layout 1 has no `clustering` action."""
        return Action.CLUSTERING if self.version >= 2 else Action.REPLACE_COMMIT

    def file_name(self, instant: Instant) -> str:
        return instant_file_name(instant, self.version)

    def path(self, instant: Instant) -> str:
        return f"{self.folder}/{self.file_name(instant)}"

    def commit_metadata_bytes(self, metadata: CommitMetadata) -> bytes:
        """Commit metadata as an instant file holds it: JSON in layout 1, Avro in layout 2."""
        return metadata.to_avro_bytes() if self.version >= 2 else metadata.to_json()

    def log_file_instant(self, slice_base_instant: str, delta_commit: str) -> str:
        """The instant a new log file is named by: its slice's base instant in layout 1, the
        delta commit writing it in layout 2 (readers place it by that commit's completion)."""
        return delta_commit if self.version >= 2 else slice_base_instant
