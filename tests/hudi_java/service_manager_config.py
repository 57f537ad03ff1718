"""Child-side (`HudiSpark.run`) repair of Hudi's table-service-manager configuration.

Released Hudi cannot build a request of its table-service-manager client: the client reads
`hoodie.table.service.manager.deploy.extra.params` with `getStringOrDefault`, which asks the
property for its default value first, and the property has none, so every call throws
`HoodieException: There's no default value for this config: …deploy.extra.params`, whether
the writer sets the option or not (0.15.0 and 1.2.0; 0.15.0 reads `…manager.actions` the
same way, and so fails as soon as the client is enabled). Hudi's later sources give both
properties a default. Until a release does, the writer's JVM gives them the empty default
here, and Hudi's client then runs unchanged.
"""

from __future__ import annotations

from typing import Any

CONFIG_CLASS = "org.apache.hudi.common.config.HoodieTableServiceManagerConfig"
PROPERTIES = ("TABLE_SERVICE_MANAGER_ACTIONS", "TABLE_SERVICE_MANAGER_DEPLOY_EXTRA_PARAMS")
_repaired: list[str] = []
"""The keys given a default in this process's JVM (the session outlives a test)."""


def give_defaults(spark: Any) -> list[str]:
    """Give the client's properties without a default the empty one (in this JVM); the
    keys that had none."""
    config = getattr(spark._jvm, CONFIG_CLASS)
    repaired = _repaired
    for name in PROPERTIES:
        prop = getattr(config, name)
        if prop.hasDefaultValue():
            continue
        field = prop.getClass().getDeclaredField("defaultValue")
        field.setAccessible(True)
        field.set(prop, "")
        repaired.append(str(prop.key()))
    return repaired
