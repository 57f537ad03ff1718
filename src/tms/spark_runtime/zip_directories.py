"""Zip archives on a Python worker's `sys.path` read once, not before every task.

PySpark's worker calls `importlib.invalidate_caches()` at the start of every task, and up to
Python 3.12 each `zipimporter` then reads its archive's whole central directory again, in
Python: `pyspark.zip` once per package imported from it, and spark-core's jar, which PySpark
puts on the workers' path. That is 60 to 80 ms per task, whatever the task does, and a tenth
of a compaction of eight file groups. Here an archive is read again only when it changed (its
size or modification time), as the call means it to be. Python 3.13 reads archives lazily
after the call, so nothing is changed there.
"""

from __future__ import annotations

import os
import sys
import zipimport
from typing import Any

__all__ = ["read_zip_directories_once"]

_installed = False
_STAMP = "_tms_read_stamp"
"""The attribute of an importer holding its archive's (size, mtime) when it last read it."""


def read_zip_directories_once() -> None:
    """From now on in this process, `zipimporter.invalidate_caches` re-reads an archive only
    when its size or modification time changed since that importer last read it (idempotent).
    The stamp is kept per importer: several importers read one archive (one per package
    imported from it), and each must see a changed archive."""
    global _installed
    if _installed or sys.version_info >= (3, 13):
        return
    original = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self: Any) -> None:
        try:
            status = os.stat(self.archive)
        except OSError:
            original(self)
            return
        stamp = (status.st_size, status.st_mtime_ns)
        if getattr(self, _STAMP, None) == stamp:
            return
        original(self)
        setattr(self, _STAMP, stamp)

    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    _installed = True
