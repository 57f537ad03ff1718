"""Calls of Hudi's Spark SQL procedures (`CALL run_compaction(...)`) from PySpark.

Each call runs in a session of its own (`SparkSession.newSession`): the `hoodie.*` configs
it sets stay with it, so attempts that share a resident worker's SparkContext never see one
another's, and its Spark jobs are in the attempt's job group like any other work of it. Where
no procedure serves, Hudi's write client does (`write_client`)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.table import HudiTable
from tms.spark_runtime.hudi_bundle import UNAVAILABLE_HINT

__all__ = [
    "HUDI_EXTENSION",
    "HudisCode",
    "call",
    "catalog_table",
    "hadoop_path",
    "has_hudi",
    "location_refusals",
    "session",
    "write_client",
]

HUDI_EXTENSION = "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
"""The session extension that parses `CALL`: on the session when Hudi's bundle is."""

_SCHEMES = {"s3": "s3a", "gs": "gs", "file": "file"}
_LOCAL_SCHEMES = ("", "file")
_ARGUMENT = re.compile(r"^[a-z_]+$")


def has_hudi(spark: Any) -> bool:
    """Whether `spark` was started with Hudi's Spark bundle and session extension."""
    extensions = spark.sparkContext.getConf().get("spark.sql.extensions", "") or ""
    return HUDI_EXTENSION in extensions.split(",")


def ensure_hudi(spark: Any) -> None:
    """`UnsupportedTableError` when the job's Spark has no Hudi bundle to run."""
    if not has_hudi(spark):
        raise UnsupportedTableError(
            "Hudi's executor needs Hudi's Spark bundle, and the job's Spark has none (the "
            f"service could not fetch it: see /readyz): {UNAVAILABLE_HINT}"
        )


def hadoop_path(base_path: str) -> str:
    """The table's location as Hudi's Hadoop file systems name it (`s3://` is `s3a://`)."""
    scheme, sep, rest = base_path.partition("://")
    if not sep:
        return base_path
    return f"{_SCHEMES.get(scheme, scheme)}://{rest}"


def location_refusals(base_path: str) -> list[str]:
    """Why Hudi's code cannot reach the table from the job: it reads through Hadoop's file
    systems, and the job gives them no object store's jars or credentials."""
    scheme, sep, _ = base_path.partition("://")
    if sep and scheme not in _LOCAL_SCHEMES:
        return [
            f"Hudi's code reads {scheme}:// tables through Hadoop's file systems, whose jars "
            "and credentials the job does not give it; tms's own executor serves them"
        ]
    return []


class HudisCode:
    """An executor that runs Hudi's code in the job's Spark: refused where that code cannot
    reach the table (`location_refusals`), and where the executor adds reasons of its own."""

    def refusals(self, table: HudiTable) -> list[str]:
        """Why Hudi's code cannot serve `table` from a tms job; empty when it can."""
        return location_refusals(table.storage.base_path)


@contextmanager
def session(spark: Any, configs: Mapping[str, str]) -> Iterator[Any]:
    """A new session of `spark` with `configs` set, for the calls of one run."""
    own = spark.newSession()
    for key, value in configs.items():
        own.conf.set(key, value)
    yield own


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if "'" in text or "\\" in text:
        raise UnsupportedTableError(f"{text!r} cannot be passed to Hudi's procedures")
    return f"'{text}'"


def call(spark: Any, procedure: str, **arguments: object) -> list[dict[str, Any]]:
    """`CALL procedure(name => value, …)`: its rows as dicts. Arguments that are None are
    left out (the procedure's default)."""
    named = []
    for name, value in arguments.items():
        if value is None:
            continue
        if not _ARGUMENT.match(name):
            raise ValueError(f"bad procedure argument name {name!r}")
        named.append(f"{name} => {_literal(value)}")
    rows = spark.sql(f"CALL {procedure}({', '.join(named)})").collect()
    return [row.asDict() for row in rows]


@contextmanager
def catalog_table(spark: Any, path: str) -> Iterator[str]:
    """The table at `path` under a name of its own in the session's catalog, for procedures
    that take a table name only (`run_clean`). External: dropping the name keeps the table,
    and registering it writes nothing to the table."""
    name = f"tms_{uuid.uuid4().hex}"
    spark.sql(f"CREATE TABLE {name} USING hudi LOCATION {_literal(path)}")
    try:
        yield name
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


@contextmanager
def write_client(spark: Any, base_path: str, configs: Mapping[str, str]) -> Iterator[Any]:
    """Hudi's `SparkRDDWriteClient` for the table at `base_path` (as Hudi names it, see
    `hadoop_path`) with the write `configs`, closed after use."""
    jvm = spark._jvm
    properties = jvm.java.util.Properties()
    for key, value in configs.items():
        properties.setProperty(key, value)
    config = (
        jvm.org.apache.hudi.config.HoodieWriteConfig.newBuilder()
        .withPath(base_path)
        .withProperties(properties)
        .build()
    )
    context = jvm.org.apache.hudi.client.common.HoodieSparkEngineContext(spark._jsc)
    client = jvm.org.apache.hudi.client.SparkRDDWriteClient(context, config)
    try:
        yield client
    finally:
        client.close()
