"""The schema data files carry, from the schema a commit records.

Hudi records the writer's schema in commit metadata without its meta fields, while every
base file and log block holds them; services that read and rewrite files need them back.
"""

from __future__ import annotations

from typing import Any

from tms.hudi.meta_fields import META_FIELDS

__all__ = ["with_meta_fields"]


def with_meta_fields(avro_schema: dict[str, Any]) -> dict[str, Any]:
    """The table schema as base files carry it: Hudi's meta fields first (those missing)."""
    fields = avro_schema.get("fields") or []
    present = {f["name"] for f in fields}
    meta = [
        {"name": name, "type": ["null", "string"], "doc": "", "default": None}
        for name in META_FIELDS
        if name not in present
    ]
    return {**avro_schema, "fields": meta + list(fields)}
