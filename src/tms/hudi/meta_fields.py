"""Hudi's meta fields: the five columns every record of a Hudi table carries ahead of its own,
in the order every Hudi file holds them."""

from __future__ import annotations

__all__ = [
    "COMMIT_SEQNO",
    "COMMIT_TIME",
    "FILE_NAME",
    "META_FIELDS",
    "PARTITION_PATH",
    "RECORD_KEY",
]

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"

META_FIELDS: tuple[str, ...] = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
"""The meta fields in file order: `_hoodie_commit_time` first, `_hoodie_file_name` last."""
