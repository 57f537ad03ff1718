"""Tables our services must not touch are refused before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.hudi.test_timeline import new_table, next_time, put, write
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.services.table_refusals import ensure_supported, unsupported_features


def set_properties(base: str, **changes: str) -> None:
    storage = Storage(base)
    config = TableConfig.load(storage)
    TableConfig({**config.props, **changes}).save(storage)


def with_metadata_table(base: str) -> None:
    set_properties(base, **{"hoodie.table.metadata.partitions": "files"})


def bootstrapped(base: str) -> None:
    set_properties(base, **{"hoodie.bootstrap.base.path": "/warehouse/source_table"})


def with_pending_log_compaction(base: str) -> None:
    ts = next_time(base)
    put(base, f"{ts}.logcompaction.requested", avro_codec.encode("HoodieCompactionPlan", {}))


def orc_base_files(base: str) -> None:
    set_properties(base, **{"hoodie.table.base.file.format": "ORC"})


def virtual_keys(base: str) -> None:
    """Virtual keys whose key generator we cannot reproduce (Hudi's built-in ones are
    computed)."""
    set_properties(
        base,
        **{
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.class": "com.example.UserKeyGenerator",
        },
    )


CASES: dict[str, tuple[Callable[[str], None], str]] = {
    "metadata-table": (with_metadata_table, "metadata table"),
    "bootstrap": (bootstrapped, "bootstrap"),
    "pending-log-compaction": (with_pending_log_compaction, "log compaction"),
    "orc": (orc_base_files, "base file format ORC"),
    "virtual-keys": (virtual_keys, "hoodie.populate.meta.fields=false"),
}


def table_with(tmp_path: Path, case: str, table_version: int = 6) -> str:
    base = str(tmp_path / "t")
    writer = new_table(base, table_version=table_version)
    write(writer, "insert", range(20), 1)
    write(writer, "upsert", range(0, 20, 2), 2)
    assert unsupported_features(HudiTable.open(base)) == []
    CASES[case][0](base)
    return base


def listing(base: str) -> dict[str, tuple[int, int]]:
    """Every file of the table with its size and modification time."""
    return {
        str(p.relative_to(base)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in Path(base).rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_ensure_supported_names_the_feature(tmp_path: Path, case: str) -> None:
    base = table_with(tmp_path, case)
    feature = CASES[case][1]
    table = HudiTable.open(base)
    assert any(feature in reason for reason in unsupported_features(table))
    with pytest.raises(UnsupportedTableError, match=feature):
        ensure_supported(table)


REFUSED_ON_RUN = [
    (case, version) for case in ("metadata-table", "bootstrap", "orc") for version in (6, 9)
]


@pytest.mark.parametrize("service", ["compaction", "clustering", "clean"])
@pytest.mark.parametrize(("case", "table_version"), REFUSED_ON_RUN)
def test_tms_run_refuses_and_writes_nothing(
    tmp_path: Path, case: str, table_version: int, service: str
) -> None:
    base = table_with(tmp_path, case, table_version)
    before = listing(base)

    result = CliRunner().invoke(app, ["run", service, "--base-path", base, "--executor", "native"])

    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert CASES[case][1] in lines[0]
    assert "Traceback" not in result.output
    assert listing(base) == before
