"""Where the tests' real Hudi tables and HBase HFiles live: `tests/fixtures/`, in the repository
(its README says where each came from). Tests read no data outside the repository."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HUDI_TABLES = FIXTURES / "hudi-tables"
"""Tables written by Apache Hudi's Spark writer: `<name>.zip` and the `<name>.sql` that wrote it."""
HFILES = FIXTURES / "hfile"
"""HFiles written by HBase as Hudi 1.0 writes them for the metadata table."""
