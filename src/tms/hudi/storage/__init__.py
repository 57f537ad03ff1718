"""A table's files on local disk or an object store, behind `Storage` (`storage`).

Beside it: the filesystem of a base path's scheme (`schemes`), the requests each call issues,
counted by kind (`requests`), and the storage options a table may carry (`options`).
"""

from tms.hudi.storage.storage import FileInfo, Storage

__all__ = ["FileInfo", "Storage"]
