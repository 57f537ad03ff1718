"""Record keys and partition paths computed from data fields, as Hudi's key generators do.

A table without meta fields (`hoodie.populate.meta.fields=false`, virtual keys) stores no
`_hoodie_record_key` or `_hoodie_partition_path`: whoever merges its records computes the key
with the table's key generator, and whoever writes new records computes both. Handled: the
simple, complex, non-partitioned, timestamp-based and custom key generators (`table_keys` reads
them from `hoodie.properties`, `generation` computes, `values` prints key values as Hudi does,
`timestamps`, `joda` and `zones` print timestamp partition paths).
"""

from tms.hudi.record_keys.generation import KeyGeneration, KeyGeneratorKind, without_meta_values
from tms.hudi.record_keys.table_keys import (
    URL_ENCODE_PARTITIONING,
    key_generation,
    key_generation_refusals,
    virtual_key_generation,
)
from tms.hudi.record_keys.values import (
    DEFAULT_PARTITION_PATH,
    EMPTY_PLACEHOLDER,
    NULL_PLACEHOLDER,
    escape_path_name,
)

__all__ = [
    "DEFAULT_PARTITION_PATH",
    "EMPTY_PLACEHOLDER",
    "NULL_PLACEHOLDER",
    "URL_ENCODE_PARTITIONING",
    "KeyGeneration",
    "KeyGeneratorKind",
    "escape_path_name",
    "key_generation",
    "key_generation_refusals",
    "virtual_key_generation",
    "without_meta_values",
]
