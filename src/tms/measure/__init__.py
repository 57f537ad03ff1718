"""What tms measures of a table's layout on storage, for operators and for policies that
tune themselves: the latest file slices, their log files, base file sizes and small files
(`measure.layout`), with the order statistics they use (`measure.stats`). Reads only
`tms.hudi`; the service side stores a measurement per table over time."""

from tms.measure.layout import (
    DEFAULT_SMALL_FILE_LIMIT,
    SMALL_FILE_LIMIT_KEY,
    WORST_PARTITIONS,
    LayoutMeasurement,
    PartitionSmallFiles,
    layout_of,
    measure_table,
    small_file_limit,
)
from tms.measure.stats import Spread, percentile, spread

__all__ = [
    "DEFAULT_SMALL_FILE_LIMIT",
    "SMALL_FILE_LIMIT_KEY",
    "WORST_PARTITIONS",
    "LayoutMeasurement",
    "PartitionSmallFiles",
    "Spread",
    "layout_of",
    "measure_table",
    "percentile",
    "small_file_limit",
    "spread",
]
