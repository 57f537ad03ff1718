"""The write configs Hudi's code runs with on a table: its own `hoodie.properties` (Hudi
reads them itself) plus what keeps a run to the operation it serves."""

from __future__ import annotations

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import FILESYSTEM_PROVIDER, POSTGRES_PROVIDER, LockSpec
from tms.hudi.metadata.index_defs import read_index_definitions
from tms.hudi.metadata.partitions import RECORD_INDEX
from tms.hudi.properties import KEY_GENERATOR_CLASS, KEY_GENERATOR_TYPE, PARTITION_FIELDS
from tms.hudi.table import HudiTable
from tms.services.apache_hudi.procedures import hadoop_path

__all__ = [
    "IN_PROCESS_PROVIDER",
    "PARTITIONED_RECORD_INDEX",
    "PARTITION_SWITCHES",
    "key_generator_options",
    "lock_options",
    "procedure_options",
    "session_options",
]

IN_PROCESS_PROVIDER = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
NEVER = str(2**31 - 1)
"""A count of delta commits the metadata table never reaches: no inline compaction of it."""

PARTITION_SWITCHES = {
    "column_stats": ("hoodie.metadata.index.column.stats.enable",),
    "partition_stats": ("hoodie.metadata.index.partition.stats.enable",),
    "bloom_filters": ("hoodie.metadata.index.bloom.filter.enable",),
    RECORD_INDEX: (
        "hoodie.metadata.record.index.enable",
        "hoodie.metadata.global.record.level.index.enable",
    ),
}
"""Hudi's switch of each metadata partition it builds from write configs: on where the table
has the partition (a switch left off drops it), off elsewhere (one left on builds it)."""
PARTITIONED_RECORD_INDEX = "hoodie.metadata.record.level.index.enable"
"""Hudi 1.1's switch of a partitioned record index. Hudi keys the record index entries a run
writes by the write config's switch, not the table's definition: a partitioned index updated
under the global switch maps its keys wrong."""


def session_options(table: HudiTable, *, compact_metadata: bool = False) -> dict[str, str]:
    """Configs for the SparkSession Hudi's procedures read (`hoodie.*` session configs rank
    above the table's and below a procedure's own `options`)."""
    config = table.config
    built = set(config.metadata_partitions)
    options = {
        "hoodie.write.table.version": str(config.table_version),
        "hoodie.write.auto.upgrade": "false",
        "hoodie.clean.automatic": "false",
        "hoodie.archive.automatic": "false",
        "hoodie.write.markers.type": "DIRECT",
        "hoodie.metadata.enable": "true" if built else "false",
        # Hudi 1.2's streaming writes of the metadata table fail on tables Hudi 1.1 wrote
        # ("Failed to retrieve files in partition"), as do its writes after the commit when
        # its embedded timeline server is off: that server stays on (Hudi's default)
        "hoodie.metadata.streaming.write.enabled": "false",
    }
    partitioned = RECORD_INDEX in built and _partitioned_record_index(table)
    for partition, keys in PARTITION_SWITCHES.items():
        on = partition in built and not (partition == RECORD_INDEX and partitioned)
        options.update(dict.fromkeys(keys, "true" if on else "false"))
    options[PARTITIONED_RECORD_INDEX] = "true" if partitioned else "false"
    if not compact_metadata:
        options["hoodie.metadata.compact.max.delta.commits"] = NEVER
    return options


def key_generator_options(table: HudiTable) -> dict[str, str]:
    """The writer's key generator configs, from the table's own: Hudi's write client computes
    the record keys of a table with virtual keys from these, not from `hoodie.properties`
    (without them it infers a simple key generator and fails to make one)."""
    config = table.config
    options = {
        "hoodie.datasource.write.recordkey.field": ",".join(config.record_key_fields),
        "hoodie.datasource.write.partitionpath.field": config.get(PARTITION_FIELDS),
    }
    if config.get(KEY_GENERATOR_CLASS):
        options["hoodie.datasource.write.keygenerator.class"] = config.get(KEY_GENERATOR_CLASS)
    elif config.get(KEY_GENERATOR_TYPE):
        options["hoodie.datasource.write.keygenerator.type"] = config.get(KEY_GENERATOR_TYPE)
    return options


def _partitioned_record_index(table: HudiTable) -> bool:
    definition = read_index_definitions(table.storage, table.config).get(RECORD_INDEX)
    return definition is not None and definition.is_partitioned


def lock_options(table: HudiTable, lock: LockSpec) -> dict[str, str]:
    """The writers' lock as Hudi takes it. The file-system lock is the same file tms takes;
    a `postgres` lock is held by tms around the whole run and Hudi locks within the job."""
    if lock.provider == FILESYSTEM_PROVIDER:
        folder = f"{hadoop_path(table.storage.base_path)}/{lock.folder}"
        options = {
            "hoodie.write.lock.provider": FILESYSTEM_PROVIDER,
            "hoodie.write.lock.filesystem.path": folder,
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        }
        if lock.expire_minutes:
            options["hoodie.write.lock.filesystem.expire"] = f"{lock.expire_minutes:g}"
        return options
    if lock.provider == POSTGRES_PROVIDER:
        return {"hoodie.write.lock.provider": IN_PROCESS_PROVIDER}
    raise UnsupportedTableError(f"lock provider {lock.provider} cannot be given to Hudi's code")


def procedure_options(options: dict[str, str]) -> str:
    """A procedure's `options` argument (`k=v,k=v`: Hudi splits it on `,` and `=`, with no
    escape); `UnsupportedTableError` for a value it would split wrongly."""
    for key, value in options.items():
        if any(c in f"{key}{value}" for c in ",='\\"):
            raise UnsupportedTableError(
                f"{key}={value!r} cannot be passed to Hudi's procedures (it holds , = ' or \\)"
            )
    return ",".join(f"{key}={value}" for key, value in options.items())
