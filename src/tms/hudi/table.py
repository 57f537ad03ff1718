"""A Hudi table on storage: its configuration, timeline and file-system view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tms.hudi.errors import (
    TableNotFoundError,
    UnsupportedTableError,
)
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.locks import LockSpec
from tms.hudi.properties import (
    PROPERTIES_PATH,
    TIMELINE_PATH,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.table_paths import check_relative
from tms.hudi.timeline.timeline import Timeline

__all__ = ["HudiTable"]

READABLE_TABLE_VERSIONS = (6, 7, 8, 9)
"""Versions read, and serviced unless `tms.services.table_refusals` names a reason (on 8 and
9, timeline layout 2, a metadata table is the usual one)."""
DEFAULT_LOCK = LockSpec()
"""Hudi's file-system lock, as a writer configured with it takes it by default."""


@dataclass(frozen=True)
class HudiTable:
    storage: Storage
    config: TableConfig
    lock: LockSpec = DEFAULT_LOCK
    """How the table's writers lock it (`hoodie.write.lock.*`, not kept in the table)."""

    @classmethod
    def open(
        cls,
        base_path: str,
        storage_options: Mapping[str, Any] | None = None,
        lock: LockSpec | None = None,
    ) -> HudiTable:
        """The table at `base_path`; `storage_options` (credentials, endpoint) go to fsspec,
        `lock` says how its writers lock it (Hudi's file-system lock by default)."""
        try:  # one GET: no existence check first (a HEAD on an object store)
            storage = Storage(base_path, storage_options=storage_options)
            config = TableConfig.load(storage)
        except FileNotFoundError:
            raise TableNotFoundError(
                f"no Hudi table at {base_path}: {PROPERTIES_PATH} is missing"
            ) from None
        except (ImportError, ValueError, OSError) as exc:  # unknown scheme, no access…
            raise TableNotFoundError(f"cannot read a Hudi table at {base_path}: {exc}") from exc
        try:
            version = config.table_version
        except ValueError as exc:
            raise UnsupportedTableError(
                f"hoodie.table.version={config.get('hoodie.table.version')!r} is not a version"
            ) from exc
        if version not in READABLE_TABLE_VERSIONS:
            raise UnsupportedTableError(
                f"table version {version} is not supported; "
                f"readable versions are {', '.join(map(str, READABLE_TABLE_VERSIONS))}"
            )
        if config.get(TIMELINE_PATH):
            # instants are read and written there: it must stay inside `.hoodie/`
            check_relative(
                config.get(TIMELINE_PATH), "hoodie.properties", TIMELINE_PATH, data=False
            )
        return cls(storage, config, lock or DEFAULT_LOCK)

    @property
    def base_path(self) -> str:
        return self.storage.base_path

    @property
    def name(self) -> str:
        return self.config.table_name

    def timeline(self) -> Timeline:
        return Timeline.load(self.storage, self.config)

    def file_system_view(self, timeline: Timeline | None = None) -> FileSystemView:
        return FileSystemView.build(self.storage, timeline or self.timeline())
