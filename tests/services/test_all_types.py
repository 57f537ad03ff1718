"""A version 6 merge-on-read table with every type Hudi writes goes through compaction,
clustering and clean, reading back the same before and after each.

The table has nested records, arrays and maps of nullable records, decimals in ``fixed`` and
``bytes``, dates, timestamps (millis and micros, UTC and local), enums, ``fixed`` and
``bytes``; its columns evolve between the base files and the log files (an added column, int
widened to long, float to double); updates arrive in Avro and in Parquet log blocks.

hudi-rs 0.5 cannot read local timestamps at all (its Avro-to-Arrow schema conversion stops at
``local-timestamp-*``) and reads an enum in an Avro log block as a dictionary it cannot merge
with the base file's strings. So the table hudi-rs judges has every other type, and a second
table with enums and local timestamps is judged after each service by reading the Parquet
files the service wrote with pyarrow.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle
from tms.hudi.avro.schema import AVRO_TYPE_KEY
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY
from tms.hudi.table import HudiTable
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.testing.sample_writer.log_blocks import LogBlockFormat
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

UTC = dt.UTC
KEYS = 48
FILE_ROWS = 8
ENUM = {"type": "enum", "name": "Color", "namespace": "hoodie.typed", "symbols": ["RED", "BLUE"]}
FIXED = {"type": "fixed", "name": "Hash", "namespace": "hoodie.typed", "size": 4}
BYTES_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}


def _meta(avro_type: dict[str, Any]) -> dict[bytes, bytes]:
    return {AVRO_TYPE_KEY: json.dumps(avro_type).encode()}


def _readable_fields(new: bool) -> list[pa.Field]:
    """Every type hudi-rs reads; `new` is the evolved schema (widened, one column added)."""
    fields = [
        pa.field("dec_fixed", pa.decimal128(10, 2)),
        pa.field("dec_bytes", pa.decimal128(20, 4), metadata=_meta(BYTES_DECIMAL)),
        pa.field("day", pa.date32()),
        pa.field("at_ms", pa.timestamp("ms", tz="UTC")),
        pa.field("at_us", pa.timestamp("us", tz="UTC")),
        pa.field("hash", pa.binary(4), metadata=_meta(FIXED)),
        pa.field("blob", pa.binary()),
        pa.field("flag", pa.bool_()),
        pa.field("arr", pa.list_(pa.struct([("f1", pa.string()), ("f2", pa.int32())]))),
        pa.field("mp", pa.map_(pa.string(), pa.struct([("v1", pa.float64()), ("v2", pa.bool_())]))),
        pa.field(
            "st", pa.struct([("a", pa.string()), ("child", pa.struct([("c", pa.float64())]))])
        ),
        pa.field("evo_int", pa.int64() if new else pa.int32()),
        pa.field("evo_float", pa.float64() if new else pa.float32()),
    ]
    return fields + ([pa.field("added", pa.string())] if new else [])


def _other_fields(new: bool) -> list[pa.Field]:
    """The types hudi-rs 0.5 cannot read from log blocks."""
    fields = [
        pa.field("color", pa.string(), metadata=_meta(ENUM)),
        pa.field("local_ms", pa.timestamp("ms")),
        pa.field("local_us", pa.timestamp("us")),
    ]
    return fields + ([pa.field("added", pa.string())] if new else [])


def _value(name: str, i: int, ts: int) -> Any:
    n = i * 10 + ts
    values: dict[str, Any] = {
        "dec_fixed": decimal.Decimal(f"{n}.25"),
        "dec_bytes": decimal.Decimal(f"-{n}.0001"),
        "day": dt.date(1969, 12, 1) + dt.timedelta(days=n),
        "at_ms": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=n),
        "at_us": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=n),
        "hash": n.to_bytes(4, "big"),
        "blob": bytes([n % 256]) * (i % 3),
        "flag": n % 2 == 0,
        "arr": [{"f1": f"a{n}", "f2": n}, None] if i % 5 else [],
        "mp": [("k", {"v1": n / 2, "v2": True}), ("none", None)] if i % 4 else None,
        "st": {"a": f"s{n}", "child": {"c": n * 1.5} if i % 3 else None},
        "evo_int": n,
        "evo_float": n + 0.5,
        "added": f"added {n}",
        "color": ["RED", "BLUE"][n % 2],
        "local_ms": dt.datetime(2024, 6, 1, 8, 30) + dt.timedelta(milliseconds=n),
        "local_us": dt.datetime(1965, 6, 1, 8, 30) + dt.timedelta(microseconds=n),
    }
    return values[name]


class TypedTable:
    """A merge-on-read table of typed columns and the rows a reader must see (the model)."""

    def __init__(self, tmp_path: Path, name: str, fields: Any, table_version: int = 6) -> None:
        self.base = str(tmp_path / name)
        self.fields = fields
        table = create_table(
            self.base,
            name,
            record_key_fields=["id"],
            ordering_field="ts",
            table_version=table_version,
        )
        self.avro_blocks = HudiWriter(table, max_file_rows=FILE_ROWS)
        self.parquet_blocks = HudiWriter(
            table, max_file_rows=FILE_ROWS, log_block_format=LogBlockFormat.PARQUET
        )
        self.model: dict[str, dict[str, Any]] = {}

    def batch(self, ids: range, ts: int, *, new: bool) -> pa.Table:
        fields = [pa.field("id", pa.string()), pa.field("ts", pa.int64()), *self.fields(new)]
        rows = [
            {"id": f"k{i:03d}", "ts": ts, **{f.name: _value(f.name, i, ts) for f in fields[2:]}}
            for i in ids
        ]
        return pa.Table.from_pylist(rows, schema=pa.schema(fields))

    def write(self, writer: HudiWriter, ids: range, ts: int, *, new: bool = True) -> None:
        rows = self.batch(ids, ts, new=new)
        writer.upsert(rows)
        for row in rows.to_pylist():
            current = self.model.get(row["id"])
            if current is None or ts >= current["ts"]:
                self.model[row["id"]] = row

    def delete(self, ids: range) -> None:
        self.avro_blocks.delete(self.batch(ids, 99, new=True).select(["id"]))
        for i in ids:
            self.model.pop(f"k{i:03d}", None)

    def fill(self) -> None:
        """Base files under the old schema, then Avro and Parquet log blocks under the new."""
        self.write(self.avro_blocks, range(KEYS), ts=1, new=False)
        self.write(self.avro_blocks, range(0, KEYS, 3), ts=2)
        self.write(self.parquet_blocks, range(1, KEYS, 4), ts=3)
        self.write(self.parquet_blocks, range(0, KEYS, 6), ts=0)  # stale: loses to ts=2
        self.delete(range(5, KEYS, 7))
        self.write(self.avro_blocks, range(KEYS, KEYS + 4), ts=4)  # new keys, new file group

    def expected(self) -> list[dict[str, Any]]:
        """The model in the evolved schema, as hudi-rs returns it (sorted by record key)."""
        names = [f.name for f in self.fields(True)]
        return [
            {RECORD_KEY: key, "id": key, "ts": row["ts"], **{n: row.get(n) for n in names}}
            for key, row in sorted(self.model.items())
        ]


def oracle_rows(base: str) -> list[dict[str, Any]]:
    return oracle.snapshot(base).to_pylist()


def written_rows(base: str, paths: list[str], columns: list[str]) -> list[dict[str, Any]]:
    """Rows of the given Parquet files read with pyarrow, sorted by record key."""
    tables = [pq.read_table(Path(base) / path) for path in paths]
    table = pa.concat_tables(tables).select(columns).sort_by(RECORD_KEY)
    return table.to_pylist()


def commit_paths(base: str, instant: str, action: str) -> list[str]:
    """The files a completed instant wrote, from its commit metadata (JSON in layout 1,
    Avro in layout 2)."""
    timeline = HudiTable.open(base).timeline()
    done = timeline.get(instant)
    assert done is not None and done.is_completed and done.action.value == action
    return [stat.path for stat in timeline.commit_metadata(done).write_stats() if stat.path]


def compact(spark: Any, base: str) -> str:
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    result = execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)
    assert result.state == "COMPLETED" and result.log_files_compacted > 0
    return instant


def cluster(spark: Any, base: str) -> str:
    instant = schedule_clustering(HudiTable.open(base), target_file_size=64 * 1024 * 1024)
    assert instant is not None
    result = execute_clustering(spark, HudiTable.open(base), instant, heartbeat_interval=1)
    assert result.state == "COMPLETED" and result.files_written >= 1
    return instant


def clean(spark: Any, base: str) -> None:
    table = HudiTable.open(base)
    instant = schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert instant is not None
    result = execute_clean(spark, table, instant, heartbeat_interval=5)
    assert result.files_deleted > 0


@pytest.mark.spark
def test_every_type_hudi_rs_reads_survives_each_service(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    t = TypedTable(tmp_path, "typed", _readable_fields, table_version)
    t.fill()
    slices = oracle.file_slices(t.base)
    assert any(s["log_files"] for s in slices) and len(slices) > 2
    expected = t.expected()
    assert oracle_rows(t.base) == expected

    compact(spark, t.base)
    assert not any(s["log_files"] for s in oracle.file_slices(t.base))
    assert oracle_rows(t.base) == expected

    cluster(spark, t.base)
    assert len(oracle.file_slices(t.base)) < len(slices)
    assert oracle_rows(t.base) == expected

    clean(spark, t.base)
    assert oracle_rows(t.base) == expected
    # The evolved types are what the rewritten files hold, not the old ones.
    (live,) = {s["base_file"] for s in oracle.file_slices(t.base)}
    schema = pq.read_schema(Path(t.base) / live)
    assert schema.field("evo_int").type == pa.int64()
    assert schema.field("evo_float").type == pa.float64()
    assert schema.field("dec_bytes").type == pa.decimal128(20, 4)
    assert schema.field("hash").type == pa.binary(4)


@pytest.mark.spark
def test_enums_and_local_timestamps_survive_each_service(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    t = TypedTable(tmp_path, "typed_other", _other_fields, table_version)
    t.fill()
    expected = t.expected()
    columns = [RECORD_KEY, "id", "ts", *(f.name for f in _other_fields(True))]

    compaction = compact(spark, t.base)
    # Compaction rewrites only the slices with log files; the others keep their base file.
    paths = commit_paths(t.base, compaction, "commit")
    new_keys = {f"k{i:03d}" for i in range(KEYS, KEYS + 4)}  # a file group without log files
    assert written_rows(t.base, paths, columns) == [
        row for row in expected if row[RECORD_KEY] not in new_keys
    ]

    clustering = cluster(spark, t.base)
    assert (
        written_rows(t.base, commit_paths(t.base, clustering, "replacecommit"), columns) == expected
    )

    clean(spark, t.base)
    assert (
        written_rows(t.base, commit_paths(t.base, clustering, "replacecommit"), columns) == expected
    )
    # The files' footers keep the Avro types Arrow has no name for.
    footer = pq.read_schema(Path(t.base) / commit_paths(t.base, clustering, "replacecommit")[0])
    avro = json.loads(footer.metadata[b"parquet.avro.schema"])
    types = {f["name"]: f["type"] for f in avro["fields"]}
    assert types["color"] == ["null", ENUM]
    assert types["local_us"] == ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]
    assert [f["name"] for f in avro["fields"][: len(META_FIELDS)]] == list(META_FIELDS)
