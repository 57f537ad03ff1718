"""Hudi's write client on a table, for the services no procedure runs (an index build, a log
compaction): the table's own configs, under the writers' lock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import POSTGRES_PROVIDER
from tms.hudi.properties import CREATE_SCHEMA
from tms.hudi.table import HudiTable
from tms.services.apache_hudi.options import key_generator_options, lock_options, session_options
from tms.services.apache_hudi.procedures import (
    ensure_hudi,
    hadoop_path,
    location_refusals,
    write_client,
)

__all__ = ["table_write_client", "write_configs"]


def write_configs(table: HudiTable) -> dict[str, str]:
    """The write configs of a table service on `table` by Hudi's write client: the table's
    own properties and key generator, what keeps the run to the service (`session_options`),
    the writers' lock, and the writer's schema (Hudi reads the files with it)."""
    config = table.config
    options = {**config.props, **key_generator_options(table), **session_options(table)}
    options.update(lock_options(table, table.lock))
    options["hoodie.table.name"] = config.table_name
    schema = table.timeline().latest_schema() or config.get(CREATE_SCHEMA)
    if schema:
        options["hoodie.avro.schema"] = schema
    return options


@contextmanager
def table_write_client(spark: Any, table: HudiTable, configs: Mapping[str, str]) -> Iterator[Any]:
    """Hudi's `SparkRDDWriteClient` for `table` with `configs`, closed after use, under tms's
    hold of a `postgres` lock (Hudi locks in-process inside it)."""
    ensure_hudi(spark)
    refused = location_refusals(table.storage.base_path)
    if refused:
        raise UnsupportedTableError("; ".join(refused))
    held = table.lock.hold(table.storage) if table.lock.provider == POSTGRES_PROVIDER else None
    path = hadoop_path(table.storage.base_path)
    with held or nullcontext(), write_client(spark, path, configs) as client:
        yield client
