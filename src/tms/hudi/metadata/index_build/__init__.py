"""Building metadata table partitions of an existing table on Spark (RFC-45's `index` action):
the records of `column_stats`, `partition_stats` and `record_index` from the data table's
latest file slices as of an instant, written as base HFiles of new file groups, and the
catch-up of the instants that completed while they were built, as log files.

`spec` says what is built, `build` writes it, `catch_up` brings it forward.
"""

from tms.hudi.metadata.index_build.build import build_partitions
from tms.hudi.metadata.index_build.catch_up import catch_up
from tms.hudi.metadata.index_build.sizing import estimate_file_group_count
from tms.hudi.metadata.index_build.spec import (
    BUILDABLE,
    DataTable,
    IndexSpec,
    IndexWrite,
    index_definitions,
    index_spec,
    native_refusals,
    request_refusals,
)

__all__ = [
    "BUILDABLE",
    "DataTable",
    "IndexSpec",
    "IndexWrite",
    "build_partitions",
    "catch_up",
    "estimate_file_group_count",
    "index_definitions",
    "index_spec",
    "native_refusals",
    "request_refusals",
]
