"""Index definitions of a Hudi 1.x table (`hoodie.table.index.defs.path`, JSON written by
`HoodieIndexMetadata`): which index each metadata partition holds, over which columns, and at
which index version (V1, V2…; a version 2 secondary index routes keys by secondary key)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table_paths import check_relative

__all__ = ["INDEX_DEFS_PATH", "IndexDefinition", "load_index_definitions"]

INDEX_DEFS_PATH = "hoodie.table.index.defs.path"


@dataclass(frozen=True)
class IndexDefinition:
    name: str
    index_type: str
    source_fields: tuple[str, ...] = ()
    version: int = 1
    options: dict[str, str] = field(default_factory=dict)

    @property
    def is_partitioned(self) -> bool:
        """A partitioned record index (Hudi 1.1 `isPartitioned`)."""
        return self.options.get("isPartitioned", "false").lower() == "true"


def _version(value: Any) -> int:
    text = str(value or "V1").upper().lstrip("V")
    return int(text) if text.isdigit() else 1


def load_index_definitions(storage: Storage, config: TableConfig) -> dict[str, IndexDefinition]:
    """Definitions by metadata partition name; empty when the table has none."""
    path = config.get(INDEX_DEFS_PATH)
    if not path:
        return {}
    check_relative(path, "hoodie.properties", INDEX_DEFS_PATH, data=False)
    if not storage.exists(path):
        return {}
    raw = json.loads(storage.read_bytes(path).decode("utf-8"))
    out: dict[str, IndexDefinition] = {}
    for name, spec in (raw.get("indexDefinitions") or {}).items():
        out[name] = IndexDefinition(
            name=str(spec.get("indexName") or name),
            index_type=str(spec.get("indexType") or ""),
            source_fields=tuple(spec.get("sourceFields") or ()),
            version=_version(spec.get("version")),
            options={str(k): str(v) for k, v in (spec.get("indexOptions") or {}).items()},
        )
    return out
