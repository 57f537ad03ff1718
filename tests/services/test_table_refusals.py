"""Who answers a table's refusals: a table the services open in a role of their own (the
metadata table, for its clean) answers its own (`RefusingTable`), with its own words; a table
as the format layer opens it gets the data table's rules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hudi.test_unsupported import table_with
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import (
    BASE_FILE_FORMAT,
    TABLE_VERSION,
    TIMELINE_LAYOUT_VERSION,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.services.metadata.table import MetadataTable
from tms.services.table_refusals import (
    DataTableRefusals,
    RefusingTable,
    ensure_supported,
    refusals_of,
    unsupported_features,
)


def _metadata_table(root: Path, layout: int) -> MetadataTable:
    """A metadata table of table version 8 whose timeline is `layout`, with HFile base files
    (which the data table's rules refuse)."""
    config = TableConfig(
        {TABLE_VERSION: "8", TIMELINE_LAYOUT_VERSION: str(layout), BASE_FILE_FORMAT: "HFILE"}
    )
    return MetadataTable(Storage(str(root)), config)


def test_a_metadata_table_answers_by_its_own_rule(tmp_path: Path) -> None:
    fitting = _metadata_table(tmp_path, layout=2)
    assert isinstance(fitting, RefusingTable) and refusals_of(fitting) is fitting
    assert unsupported_features(fitting) == []
    ensure_supported(fitting)

    mismatched = _metadata_table(tmp_path, layout=1)
    reason = "the metadata table's timeline is layout 1, not layout 2 of table version 8"
    assert unsupported_features(mismatched) == [reason]
    with pytest.raises(UnsupportedTableError) as refused:
        ensure_supported(mismatched)
    assert str(refused.value) == f"cannot clean the metadata table {tmp_path}: {reason}"


def test_a_table_of_the_format_layer_gets_the_data_tables_rules(tmp_path: Path) -> None:
    table = HudiTable.open(table_with(tmp_path, "orc"))
    assert not isinstance(table, RefusingTable)
    assert refusals_of(table) == DataTableRefusals(table)
    assert unsupported_features(table) == ["base file format ORC is not handled"]
    with pytest.raises(UnsupportedTableError) as refused:
        ensure_supported(table)
    expected = f"cannot run table services on {table.base_path}: base file format ORC"
    assert str(refused.value) == expected + " is not handled"


@dataclass(frozen=True)
class _ArchivedTable(HudiTable):
    """A kind of table the services might open one day, with rules of its own."""

    def refusals(self) -> list[str]:
        return ["archived tables are read-only"]

    def refused_work(self) -> str:
        return f"touch the archived table {self.base_path}"


def test_a_new_kind_of_table_brings_its_rules_without_an_edit_here(tmp_path: Path) -> None:
    table = _ArchivedTable(Storage(str(tmp_path)), TableConfig({TABLE_VERSION: "8"}))
    with pytest.raises(UnsupportedTableError) as refused:
        ensure_supported(table)
    assert str(refused.value) == (
        f"cannot touch the archived table {tmp_path}: archived tables are read-only"
    )
