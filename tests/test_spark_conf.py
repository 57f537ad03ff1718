"""The allow-list of Spark settings requests may carry to spark-submit."""

from __future__ import annotations

import pytest

from tms.config import SettingsError, load_settings
from tms.config.spark_conf import DEFAULT_ALLOW_LIST, DEFAULT_ALLOWED, allow_list

ALLOWED = [
    "spark.executor.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.driver.memory",
    "spark.default.parallelism",
    "spark.sql.shuffle.partitions",
    "spark.memory.fraction",
    "spark.dynamicAllocation.maxExecutors",
    "spark.sql.adaptive.enabled",
    "spark.sql.adaptive.coalescePartitions.minPartitionSize",
    "spark.speculation",
    "spark.speculation.multiplier",
    "spark.task.cpus",
    "spark.network.timeout",
    "spark.kryoserializer.buffer.max",
]
REFUSED = [
    "spark.pyspark.driver.python",
    "spark.pyspark.python",
    "spark.jars",
    "spark.jars.packages",
    "spark.plugins",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraClassPath",
    "spark.driver.extraLibraryPath",
    "spark.files",
    "spark.archives",
    "spark.submit.pyFiles",
    "spark.sql.extensions",
    "spark.extraListeners",
    "spark.executorEnv.LD_PRELOAD",
    "spark.serializer",
    "spark.io.compression.codec",
    "spark.master",
    "spark.submit.deployMode",
    "spark.sql.adaptive.customCostEvaluatorClass",  # a class under an allowed prefix
    "spark.speculationJar",  # likewise
    "spark.executor.memory=1g",
    "spark.",
    "spark.executor.memory.",
]


@pytest.mark.parametrize("key", ALLOWED)
def test_tuning_keys_pass(key: str) -> None:
    assert DEFAULT_ALLOW_LIST.refusal(key) is None


@pytest.mark.parametrize("key", REFUSED)
def test_keys_that_name_code_paths_or_options_are_refused(key: str) -> None:
    reason = DEFAULT_ALLOW_LIST.refusal(key)
    assert reason is not None and reason


def test_refused_reports_spark_keys_only_with_their_reasons() -> None:
    refused = DEFAULT_ALLOW_LIST.refused(
        {
            "spark.executor.cores": "2",
            "spark.jars": "/tmp/x.jar",
            "spark.sql.adaptive.customCostEvaluatorClass": "x.Y",
            "retained": "3",
        }
    )
    assert sorted(refused) == ["spark.jars", "spark.sql.adaptive.customCostEvaluatorClass"]
    assert "TMS_SPARK_CONF_ALLOWED" in refused["spark.jars"]
    assert "class" in refused["spark.sql.adaptive.customCostEvaluatorClass"]


def test_the_default_list_names_no_code() -> None:
    words = ("class", "jar", "plugin", "python", "java", "path", "file", "dir", "env", "script")
    for entry in DEFAULT_ALLOWED:
        assert not any(word in entry.lower() for word in words), entry


def test_administrators_extend_or_replace_the_list() -> None:
    extended = allow_list(
        load_settings(
            config_file=False,
            environ={
                "TMS_SPARK_CONF_ALLOWED_EXTRA": "spark.kubernetes.container.image, spark.ui.*"
            },
        )
    )
    assert extended.refusal("spark.kubernetes.container.image") is None
    assert extended.refusal("spark.ui.port") is None
    assert extended.refusal("spark.executor.cores") is None  # the defaults stay
    replaced = allow_list(
        load_settings(config_file=False, environ={"TMS_SPARK_CONF_ALLOWED": "spark.task.cpus"})
    )
    assert replaced.refusal("spark.task.cpus") is None
    assert replaced.refusal("spark.executor.cores") is not None
    nothing = allow_list(load_settings(config_file=False, environ={"TMS_SPARK_CONF_ALLOWED": ""}))
    assert nothing.refusal("spark.executor.cores") is not None


@pytest.mark.parametrize("entry", ["spark.*", "spark*", "*", "hoodie.x", "spark.a b", "spark..x"])
def test_a_bad_entry_stops_the_service_at_start(entry: str) -> None:
    with pytest.raises(SettingsError, match="TMS_SPARK_CONF_ALLOWED_EXTRA"):
        load_settings(config_file=False, environ={"TMS_SPARK_CONF_ALLOWED_EXTRA": entry})
