"""Which executor runs an operation's plan (`TableService.decide`), and the configs Hudi's
code runs with (`tms.services.apache_hudi.options`): decided from the table before anything is
written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi.test_metadata_refusals import PARTITIONS, partitioned_record_index, set_property
from tms.hudi.actions import INDEXING, METADATA_COMPACTION
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import POSTGRES_PROVIDER, LockSpec
from tms.hudi.metadata.indexing import schedule_indexing
from tms.hudi.table import HudiTable
from tms.services.apache_hudi.indexer import index_configs
from tms.services.apache_hudi.options import (
    IN_PROCESS_PROVIDER,
    PARTITIONED_RECORD_INDEX,
    lock_options,
    procedure_options,
    session_options,
)
from tms.services.apache_hudi.procedures import hadoop_path, location_refusals
from tms.services.registry import Work, table_service
from tms.spark_runtime.hudi_bundle import bundle_in_cache, hudi_jars, hudi_spark_conf
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CUSTOM_PAYLOAD = {"hoodie.compaction.payload.class": "com.example.MyPayload"}


def table(
    tmp_path: Path, version: int = 9, table_type: str = "MERGE_ON_READ", **properties: str
) -> HudiTable:
    return create_table(
        str(tmp_path / f"t{version}{table_type}"),
        "t",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["part"],
        table_version=version,
        extra_properties=dict(properties),
    )


def test_auto_runs_native_where_it_supports_the_table(tmp_path: Path) -> None:
    decision = table_service("compaction").decide(table(tmp_path), "auto")
    assert (decision.executor, decision.native_declined) == ("native", None)
    assert decision.figures() == {"executor": "native"}


def test_auto_hands_a_table_native_declines_to_hudi_with_the_reason(tmp_path: Path) -> None:
    refused = table(tmp_path, 6, **CUSTOM_PAYLOAD)
    for action in ("compaction", "clustering", "clean"):
        decision = table_service(action).decide(refused, "AUTO")
        assert decision.executor == "hudi"
        assert decision.native_declined is not None and "MyPayload" in decision.native_declined
        assert decision.figures()["native_declined"] == decision.native_declined


def test_native_asked_for_refuses_the_table_it_would_damage(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedTableError, match="MyPayload"):
        table_service("compaction").decide(table(tmp_path, 6, **CUSTOM_PAYLOAD), "native")


def test_hudi_asked_for_runs_hudi_even_where_native_would(tmp_path: Path) -> None:
    assert table_service("clustering").decide(table(tmp_path), "hudi").executor == "hudi"


def test_metadata_compaction_has_no_hudi_executor_and_keeps_native_for_auto(
    tmp_path: Path,
) -> None:
    supported = table(tmp_path)
    service = table_service(METADATA_COMPACTION)
    with pytest.raises(UnsupportedTableError, match="has no hudi executor"):
        service.decide(supported, "hudi")
    assert service.decide(supported, "auto").executor == "native"


def build(*partitions: str, drop: bool = False) -> Work:
    return Work({"partitions": list(partitions), "drop": drop})


def test_auto_builds_what_native_builds_natively(tmp_path: Path) -> None:
    service = table_service(INDEXING)
    built = {"hoodie.table.metadata.partitions": "files"}
    assert service.decide(table(tmp_path), "auto", build("files")).executor == "native"
    cow = table(tmp_path, 9, "COPY_ON_WRITE", **built)
    assert service.decide(cow, "auto", build("column_stats")).executor == "native"


def test_auto_hands_a_version_6_files_build_to_hudi_with_the_reason(tmp_path: Path) -> None:
    decision = table_service(INDEXING).decide(table(tmp_path, 6), "auto", build("files"))
    assert decision.executor == "hudi"
    assert decision.native_declined is not None and "table version 6" in decision.native_declined


def test_stats_of_a_merge_on_read_table_are_built_by_neither(tmp_path: Path) -> None:
    """tms does not compute log files' stats, and Hudi 1.2's next write rolls back its own
    build's metadata delta commit: refused before anything is written, naming both reasons."""
    mor = table(tmp_path, 9, **{"hoodie.table.metadata.partitions": "files"})
    assert mor.config.is_merge_on_read
    service = table_service(INDEXING)
    with pytest.raises(UnsupportedTableError) as refused:
        service.decide(mor, "auto", build("column_stats"))
    assert "log files are not computed" in str(refused.value)
    assert "Hudi's writer rolls back" in str(refused.value)
    with pytest.raises(UnsupportedTableError, match="Hudi's writer rolls back"):
        service.decide(mor, "hudi", build("column_stats"))


def test_a_record_index_over_ambiguous_virtual_keys_is_built_by_neither(tmp_path: Path) -> None:
    """A single key field under the complex key generator: tms cannot tell the keys' form,
    and Hudi's indexer keys the bare value where Hudi's key generator keys `field:value`."""
    virtual = table(
        tmp_path,
        6,
        **{
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        },
    )
    with pytest.raises(UnsupportedTableError) as refused:
        table_service(INDEXING).decide(virtual, "auto", build("record_index"))
    assert "HUDI-7001" in str(refused.value) and "Hudi's indexer keys the bare value" in str(
        refused.value
    )
    configs = index_configs(virtual, ["record_index"])
    assert configs["hoodie.datasource.write.keygenerator.class"].endswith("ComplexKeyGenerator")
    assert configs["hoodie.datasource.write.recordkey.field"] == "id"
    assert configs["hoodie.datasource.write.partitionpath.field"] == "part"


def test_a_drop_is_tms_own_whatever_the_table(tmp_path: Path) -> None:
    service = table_service(INDEXING)
    mor = table(tmp_path, 6, **{"hoodie.table.metadata.partitions": "files"})
    assert service.decide(mor, "auto", build("files", drop=True)).executor == "native"


def test_a_pending_plans_partitions_decide_for_a_planned_build(tmp_path: Path) -> None:
    """An operation that runs a plan (a writer's, or one planned before) is decided by the
    partitions of that plan."""
    t = table(tmp_path, 6)
    HudiWriter(t).insert(pa.table({"id": ["a"], "ts": [1], "part": ["p"]}))
    instant = schedule_indexing(t.storage, ["files"], {})
    decision = table_service(INDEXING).decide(t, "auto", Work(None, instant))
    assert decision.executor == "hudi" and "table version 6" in (decision.native_declined or "")


def test_an_unknown_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="auto, native, hudi"):
        table_service("clean").decide(table(tmp_path), "spark")


def test_hudi_code_reaches_local_tables_only() -> None:
    assert location_refusals("/data/t") == [] and location_refusals("file:///data/t") == []
    (reason,) = location_refusals("s3://bucket/t")
    assert "s3://" in reason and "Hadoop" in reason
    assert hadoop_path("s3://bucket/t") == "s3a://bucket/t"
    assert hadoop_path("/data/t") == "/data/t"


def test_hudi_runs_with_the_tables_version_and_only_its_metadata_partitions(
    tmp_path: Path,
) -> None:
    built = {"hoodie.table.metadata.partitions": "files,column_stats"}
    options = session_options(table(tmp_path, 6, **built))
    assert options["hoodie.write.table.version"] == "6"
    assert options["hoodie.write.auto.upgrade"] == "false"
    assert options["hoodie.clean.automatic"] == options["hoodie.archive.automatic"] == "false"
    assert options["hoodie.metadata.enable"] == "true"
    assert options["hoodie.metadata.index.column.stats.enable"] == "true"
    assert options["hoodie.metadata.index.partition.stats.enable"] == "false"
    assert options["hoodie.metadata.index.bloom.filter.enable"] == "false"
    assert options["hoodie.metadata.record.index.enable"] == "false"
    assert options["hoodie.metadata.compact.max.delta.commits"] == str(2**31 - 1)


def test_a_partitioned_record_index_is_kept_under_hudis_partitioned_switch(
    tmp_path: Path,
) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    global_index = session_options(HudiTable.open(str(root)))
    assert global_index["hoodie.metadata.global.record.level.index.enable"] == "true"
    assert global_index[PARTITIONED_RECORD_INDEX] == "false"
    partitioned_record_index(root)
    options = session_options(HudiTable.open(str(root)))
    assert options[PARTITIONED_RECORD_INDEX] == "true"
    assert options["hoodie.metadata.record.index.enable"] == "false"
    assert options["hoodie.metadata.global.record.level.index.enable"] == "false"


def test_hudis_clean_is_refused_on_a_table_with_an_expression_index(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    set_property(root, "hoodie.table.metadata.partitions", PARTITIONS + ",expr_index_ts_day")
    indexed = HudiTable.open(str(root))
    assert table_service("clustering").decide(indexed, "auto").executor == "hudi"
    for choice in ("auto", "hudi"):
        with pytest.raises(UnsupportedTableError, match=r"clean breaks .* \(expr_index_ts_day\)"):
            table_service("clean").decide(indexed, choice)


def test_a_table_without_a_metadata_table_gets_none(tmp_path: Path) -> None:
    assert session_options(table(tmp_path))["hoodie.metadata.enable"] == "false"


def test_the_writers_lock_goes_to_hudi(tmp_path: Path) -> None:
    t = table(tmp_path)
    options = lock_options(t, LockSpec.of(expire_minutes=5))
    assert options["hoodie.write.lock.filesystem.path"] == f"{t.storage.base_path}/.hoodie"
    assert options["hoodie.write.lock.filesystem.expire"] == "5"
    assert options["hoodie.write.concurrency.mode"] == "optimistic_concurrency_control"
    postgres = lock_options(t, LockSpec.of(POSTGRES_PROVIDER))
    assert postgres == {"hoodie.write.lock.provider": IN_PROCESS_PROVIDER}


def test_procedure_options_refuse_what_hudi_would_split_wrongly() -> None:
    assert procedure_options({"a": "1", "b": "x/y"}) == "a=1,b=x/y"
    for bad in ("a,b", "a=b", "it's"):
        with pytest.raises(UnsupportedTableError, match="cannot be passed"):
            procedure_options({"k": bad})


def test_the_bundle_is_the_configured_jars_else_the_cached_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMS_MAVEN_CACHE", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # an empty bundle cache
    assert hudi_jars() == [] and hudi_spark_conf([]) == {}
    jar = bundle_in_cache()
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    assert hudi_jars() == [str(jar)]
    assert hudi_jars(" /a.jar, /b.jar ") == ["/a.jar", "/b.jar"]
    conf = hudi_spark_conf(["/a.jar"])
    assert conf["spark.jars"] == "/a.jar"
    assert conf["spark.sql.extensions"] == "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
    assert conf["spark.serializer"] == "org.apache.spark.serializer.KryoSerializer"
