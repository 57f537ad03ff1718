"""Apache Hudi's own timeline server (`org.apache.hudi.timeline.service.TimelineService`, the
server a Hudi writer embeds) started in the Hudi child's JVM through `HudiSpark.run`: the
oracle the tests compare tms's answers with. Hudi 1.x's constructor only."""

from __future__ import annotations

from typing import Any

_RUNNING: dict[int, Any] = {}


def start(spark: Any, port: int) -> int:
    """Start Hudi's timeline server on `port` (0: any free port); the port it listens on."""
    jvm = spark._jvm
    package = jvm.org.apache.hudi.timeline.service
    config = getattr(package, "TimelineService$Config").builder().serverPort(port).build()
    storage = jvm.org.apache.hudi.storage.hadoop.HadoopStorageConfiguration(
        spark._jsc.hadoopConfiguration()
    )
    hudi = jvm.org.apache.hudi
    # as the embedded server builds them: file listings from the table's metadata table
    views = hudi.common.table.view.FileSystemViewManager.createViewManagerWithTableMetadata(
        hudi.client.common.HoodieSparkEngineContext(spark._jsc),
        hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build(),
        hudi.common.table.view.FileSystemViewStorageConfig.newBuilder().build(),
        hudi.common.config.HoodieCommonConfig.newBuilder().build(),
    )
    service = package.TimelineService(storage, config, views)
    listening = int(service.startService())
    _RUNNING[listening] = service
    return listening


def stop(spark: Any, port: int) -> None:
    service = _RUNNING.pop(port, None)
    if service is not None:
        service.close()
