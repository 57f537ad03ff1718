"""The metadata table against the file system, as Hudi's own classes see them: run in a Hudi
release's child process (`HudiSpark.run("tests.hudi_java.metadata_check:compare", ...)`).

`HoodieMetadataTableValidator` (hudi-utilities) is what Hudi's tests run for this, and
hudi-utilities is not served here; this ports its comparisons that the Spark bundle's classes
reach, with Hudi's code reading both sides:

- partitions: `HoodieBackedTableMetadata.getAllPartitionPaths` against
  `FileSystemBackedTableMetadata`'s (a listing);
- files of each partition: `getAllFilesInPartition` of both (names and sizes);
- latest file slices and latest base files: a `HoodieTableFileSystemView` built from the
  metadata table against one built from a listing (`FileSystemViewManager
  .createInMemoryFileSystemView`, metadata on and off, as the validator builds its two
  contexts), each slice's base file and log files;
- record index: every record key a snapshot read returns maps to its partition and file group
  (looked up in its own data partition when the record index is partitioned),
  and keys the caller knows were deleted map nowhere;
- column stats: each latest base file's min, max, null count and value count of the asked
  columns against those computed by reading the file itself.

Partition stats and bloom filters are not compared (the validator reads them through classes
the Spark bundle does not expose the same way in every release).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tms.hudi.metadata.index_defs import read_index_definitions
from tms.hudi.table import HudiTable

__all__ = ["compare"]

Problems = list[str]
Location = tuple[str, str]
"""(partition path, file id) of a record."""


def hudi_metadata(spark: Any, base_path: str) -> tuple[Any, Any]:
    """Hudi's meta client of the table and its `HoodieBackedTableMetadata` (the metadata
    table as Hudi's readers read it)."""
    hudi = spark._jvm.org.apache.hudi
    storage_conf = hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(
        spark._jsc.hadoopConfiguration()
    )
    meta_client = (
        hudi.common.table.HoodieTableMetaClient.builder()
        .setConf(storage_conf)
        .setBasePath(base_path)
        .build()
    )
    context = hudi.client.common.HoodieSparkEngineContext(spark._jsc)
    enabled = hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build()
    metadata = hudi.metadata.HoodieBackedTableMetadata(
        context, meta_client.getStorage(), enabled, base_path
    )
    return meta_client, metadata


def compare(
    spark: Any,
    base_path: str,
    stats_columns: Sequence[str] = (),
    deleted_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """What differs between the metadata table's view and the file system's (`problems`,
    empty when none) and how much was compared (counts, so a check of nothing shows)."""
    jvm = spark._jvm
    hudi = jvm.org.apache.hudi
    meta_client, metadata = hudi_metadata(spark, base_path)
    context = hudi.client.common.HoodieSparkEngineContext(spark._jsc)
    storage = meta_client.getStorage()
    enabled = hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build()
    listing_config = hudi.common.config.HoodieMetadataConfig.newBuilder().enable(False).build()
    listing = hudi.metadata.FileSystemBackedTableMetadata(context, storage, base_path)
    problems: Problems = []
    counts = {"partitions": 0, "files": 0, "slices": 0, "record_keys": 0, "column_stats": 0}

    partitions = sorted(str(p) for p in metadata.getAllPartitionPaths())
    listed = sorted(str(p) for p in listing.getAllPartitionPaths())
    if partitions != listed:
        problems.append(f"partitions: metadata {partitions}, listing {listed}")
    counts["partitions"] = len(listed)

    for partition in listed:
        path = hudi.storage.StoragePath(base_path, partition) if partition else None
        path = path or hudi.storage.StoragePath(base_path)
        from_metadata = _files(metadata.getAllFilesInPartition(path))
        from_listing = _files(listing.getAllFilesInPartition(path))
        if from_metadata != from_listing:
            problems.append(
                f"files of {partition!r}: only in metadata {_only(from_metadata, from_listing)}, "
                f"only listed {_only(from_listing, from_metadata)}"
            )
        counts["files"] += len(from_listing)

    views = [
        hudi.common.table.view.FileSystemViewManager.createInMemoryFileSystemView(
            context, meta_client, config
        )
        for config in (enabled, listing_config)
    ]
    latest_bases: list[tuple[str, str]] = []
    for partition in listed:
        slices = [_slices(view, partition) for view in views]
        if slices[0] != slices[1]:
            problems.append(
                f"latest file slices of {partition!r}: metadata {slices[0]}, listing {slices[1]}"
            )
        bases = [_base_files(view, partition) for view in views]
        if bases[0] != bases[1]:
            problems.append(
                f"latest base files of {partition!r}: metadata {bases[0]}, listing {bases[1]}"
            )
        counts["slices"] += len(slices[1])
        latest_bases += [(partition, name) for name, _ in bases[1]]
    for view in views:
        view.close()

    partitions_enabled = {str(p) for p in meta_client.getTableConfig().getMetadataPartitions()}
    if "record_index" in partitions_enabled:
        counts["record_keys"] = _check_record_index(
            spark, metadata, base_path, deleted_keys, problems
        )
    if "column_stats" in partitions_enabled and stats_columns:
        counts["column_stats"] = _check_column_stats(
            spark, metadata, latest_bases, base_path, stats_columns, problems
        )
    metadata.close()
    return {"problems": problems, **counts}


def _files(infos: Any) -> dict[str, int]:
    return {str(info.getPath().getName()): int(info.getLength()) for info in infos}


def _only(left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
    return {name: size for name, size in left.items() if right.get(name) != size}


def _slices(view: Any, partition: str) -> list[tuple[str, str, str | None, list[str]]]:
    out = []
    for piece in view.getLatestFileSlices(partition).iterator():
        base = piece.getBaseFile()
        logs = sorted(str(log.getFileName()) for log in piece.getLogFiles().iterator())
        base_name = str(base.get().getFileName()) if base.isPresent() else None
        out.append((str(piece.getFileId()), str(piece.getBaseInstantTime()), base_name, logs))
    return sorted(out)


def _base_files(view: Any, partition: str) -> list[tuple[str, int]]:
    return sorted(
        (str(base.getFileName()), int(base.getFileSize()))
        for base in view.getLatestBaseFiles(partition).iterator()
    )


def _record_index_lookup(
    spark: Any, metadata: Any, keys: list[str], partition: str | None = None
) -> dict[str, Location]:
    """Key → (partition, file id) from the record index: `readRecordIndex` before Hudi 1.1,
    `readRecordIndexLocationsWithKeys` from 1.1 on; in `partition` of a partitioned record
    index (Hudi 1.1 looks those up one data partition at a time)."""
    hudi = spark._jvm.org.apache.hudi
    java_keys = _java_list(spark, keys)
    if partition is not None:
        data = hudi.common.data.HoodieListData.eager(java_keys)
        within = hudi.common.util.Option.of(partition)
        pairs = metadata.readRecordIndexLocationsWithKeys(data, within).collectAsList()
        return {str(pair.getKey()): _location(pair.getValue()) for pair in pairs}
    try:
        found = metadata.readRecordIndex(java_keys)
    except Exception as exc:  # py4j's answer when the release has no such method
        if "does not exist" not in str(exc):
            raise
    else:
        return {str(e.getKey()): _location(e.getValue()) for e in found.entrySet().iterator()}
    data = hudi.common.data.HoodieListData.eager(java_keys)
    pairs = metadata.readRecordIndexLocationsWithKeys(data).collectAsList()
    return {str(pair.getKey()): _location(pair.getValue()) for pair in pairs}


def _location(location: Any) -> Location:
    return str(location.getPartitionPath()), str(location.getFileId())


def _java_list(spark: Any, values: Sequence[Any]) -> Any:
    out = spark._jvm.java.util.ArrayList()
    for value in values:
        out.add(value)
    return out


def _check_record_index(
    spark: Any,
    metadata: Any,
    base_path: str,
    deleted_keys: Sequence[str],
    problems: Problems,
) -> int:
    """Every key of a snapshot read at its partition and file group in the record index (the
    validator's `validateRecordIndex`); deleted keys absent."""
    rows = (
        spark.read.format("hudi")
        .option("hoodie.metadata.enable", "false")
        .load(base_path)
        .select("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
        .collect()
    )
    fs_utils = spark._jvm.org.apache.hudi.common.fs.FSUtils
    expected = {str(row[0]): (str(row[1]), str(fs_utils.getFileId(str(row[2])))) for row in rows}
    asked = sorted(expected) + sorted(set(deleted_keys) - set(expected))
    table = HudiTable.open(base_path)
    definition = read_index_definitions(table.storage, table.config).get("record_index")
    if definition is not None and definition.is_partitioned:
        found = {}
        for partition in sorted({where for where, _ in expected.values()}):
            keys = [key for key in asked if expected.get(key, (partition,))[0] == partition]
            found.update(_record_index_lookup(spark, metadata, keys, partition))
    else:
        found = _record_index_lookup(spark, metadata, asked)
    for key in sorted(expected):
        if found.get(key) != expected[key]:
            problems.append(f"record index of {key!r}: {found.get(key)}, table {expected[key]}")
    for key in sorted(set(deleted_keys) - set(expected)):
        if key in found:
            problems.append(f"record index still maps deleted key {key!r} to {found[key]}")
    return len(expected)


def _check_column_stats(
    spark: Any,
    metadata: Any,
    bases: list[tuple[str, str]],
    base_path: str,
    columns: Sequence[str],
    problems: Problems,
) -> int:
    """Each latest base file's stats of `columns` in the metadata table against the file's own
    values (the validator's column stats check reads the files' footers)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = {
        (partition, name): pq.read_table(
            f"{base_path}/{partition}/{name}" if partition else f"{base_path}/{name}",
            columns=list(columns),
        )
        for partition, name in bases
    }
    checked = 0
    pair = spark._jvm.org.apache.hudi.common.util.collection.Pair
    for column in columns:
        wanted = _java_list(spark, [pair.of(partition, name) for partition, name in bases])
        stats = metadata.getColumnStats(wanted, column)
        by_file = {
            (str(entry.getKey().getLeft()), str(entry.getKey().getRight())): entry.getValue()
            for entry in stats.entrySet().iterator()
        }
        for (partition, name), rows in files.items():
            values = rows.column(column)
            bounds = pc.min_max(values).as_py()
            expected = (bounds["min"], bounds["max"], len(values) - values.null_count)
            expected += (values.null_count,)
            stat = by_file.get((partition, name))
            if stat is None:
                problems.append(f"column stats of {column!r} in {partition}/{name}: none")
                continue
            actual = (
                _unwrap(stat.getMinValue()),
                _unwrap(stat.getMaxValue()),
                int(stat.getValueCount()) - int(stat.getNullCount()),
                int(stat.getNullCount()),
            )
            if actual != expected:
                problems.append(
                    f"column stats of {column!r} in {partition}/{name}: metadata (min, max, "
                    f"non-null, null) {actual}, file {expected}"
                )
            checked += 1
    return checked


def _unwrap(wrapper: Any) -> Any:
    """The value of a min/max wrapper record (`LongWrapper`, `StringWrapper`, ...)."""
    if wrapper is None:
        return None
    return _plain(wrapper.get(0))


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value.toString())


def pruned_read(
    spark: Any, base_path: str, columns: Sequence[str], where: str, options: dict[str, str]
) -> dict[str, Any]:
    """A filtered read with `options` (data skipping on): its rows, sorted, and the files its
    scan read (Spark's scan metric `numFiles`: what Hudi's file index handed it after pruning,
    a file slice each)."""
    frame = spark.read.format("hudi").options(**options).load(base_path)
    filtered = frame.where(where).select(*columns)
    rows = sorted(tuple(row) for row in filtered.collect())
    return {"rows": rows, "files_read": _files_scanned(filtered)}


def _files_scanned(frame: Any) -> int:
    """`numFiles` of the executed plan's file scans (after the frame was collected)."""
    plan = frame._jdf.queryExecution().executedPlan()
    scans = plan.collectLeaves()
    total = 0
    for index in range(scans.size()):
        metrics = scans.apply(index).metrics()
        if metrics.contains("numFiles"):
            total += int(metrics.apply("numFiles").value())
    return total
