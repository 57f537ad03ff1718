"""HFile v3, the file format of the metadata table's base files: a reader for what HBase
2.4 (as Hudi 1.0 drives it) writes, and a writer producing the same layout."""

from tms.hudi.hfile.format import Compression
from tms.hudi.hfile.reader import HFileReader
from tms.hudi.hfile.writer import HFileWriter

__all__ = ["Compression", "HFileReader", "HFileWriter"]
