"""Hudi's own bloom filter, built in Hudi's Spark (called through `HudiSpark.run`): the
oracle of `tms.hudi.files.bloom`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.hudi_java.metadata_check import hudi_metadata
from tms.hudi.files.bloom import DYNAMIC_V0, FPP, MAX_ENTRIES, NUM_ENTRIES


def serialized(
    spark: Any,
    keys: Sequence[str],
    num_entries: int = NUM_ENTRIES,
    max_entries: int = MAX_ENTRIES,
) -> str:
    """`BloomFilterFactory.createBloomFilter` (Hudi's default sizes unless given), `keys`
    added in order, serialized as a base file's footer holds it."""
    factory = spark._jvm.org.apache.hudi.common.bloom.BloomFilterFactory
    bloom = factory.createBloomFilter(num_entries, FPP, max_entries, DYNAMIC_V0)
    for key in keys:
        bloom.add(key)
    return str(bloom.serializeToString())


def in_file(spark: Any, path: str, keys: Sequence[str]) -> list[bool]:
    """Whether the bloom filter Hudi reads from the base file at `path` may hold each key."""
    jvm = spark._jvm
    conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(
        spark._jsc.hadoopConfiguration()
    )
    storage = jvm.org.apache.hudi.storage.HoodieStorageUtils.getStorage(path, conf)
    utils = jvm.org.apache.hudi.common.util.ParquetUtils()
    bloom = utils.readBloomFilterFromMetadata(
        storage, jvm.org.apache.hudi.storage.StoragePath(path)
    )
    if bloom is None:
        return [False] * len(keys)
    return [bool(bloom.mightContain(key)) for key in keys]


def in_metadata_table(
    spark: Any, base_path: str, files: Sequence[tuple[str, str, Sequence[str]]]
) -> list[str | None]:
    """Per (partition, base file name, its keys): the serialized filter Hudi's metadata reader
    (`HoodieBackedTableMetadata.getBloomFilter`) returns for the file, or None when it has
    none or the filter misses one of the keys."""
    _, metadata = hudi_metadata(spark, base_path)
    found: list[str | None] = []
    for partition, name, keys in files:
        bloom = metadata.getBloomFilter(partition, name)
        if not bloom.isPresent() or not all(bloom.get().mightContain(k) for k in keys):
            found.append(None)
        else:
            found.append(str(bloom.get().serializeToString()))
    return found
