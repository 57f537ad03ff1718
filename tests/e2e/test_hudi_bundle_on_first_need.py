"""A service as a user installs it, with an empty bundle cache: the first `auto` operation on
a table tms's own code declines gets Hudi's Spark bundle fetched (Spark's package resolution,
here from a site's mirror named by an Ivy settings file), and Hudi's code completes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import TEST_SETTINGS, Service, Services
from tests.hudi_java.bundle_mirror import ivy_settings, make_mirror
from tests.hudi_java.support import HUDI_1_2, HudiSpark
from tests.hudi_java.test_every_table_serviced import FEATURES, rows, writer_options
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA
from tms.hudi.table import HudiTable
from tms.services.table_refusals import unsupported_features
from tms.spark_runtime.hudi_bundle import HUDI_ARTIFACT, HUDI_VERSION

pytestmark = [pytest.mark.spark, pytest.mark.hudi_java]

FEATURE = next(f for f in FEATURES if f.name == "custom_merge_mode_v8")
"""A version 8 table whose writer merges by a payload class of its own (merge mode CUSTOM),
which tms's own code declines."""


def test_auto_fetches_hudis_bundle_into_an_empty_cache_and_hudis_code_completes_it(
    hudi_spark: Callable[..., HudiSpark], services: Services, tmp_path: Path
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "events"
    options = writer_options(FEATURE, path)
    for start in (0, 4):
        batch = rows(start, start + 4, 1_700_000_000_000)
        hudi.write(path, batch, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    refusals = unsupported_features(HudiTable.open(str(path)))
    assert any(FEATURE.declined in reason for reason in refusals), refusals
    before = sorted(hudi.read(path, COLUMNS))

    cache = tmp_path / "bundle-cache"
    settings = ivy_settings(tmp_path / "ivysettings.xml", make_mirror(tmp_path / "mirror"))
    values = {
        **TEST_SETTINGS,
        "executor": "auto",
        "hudi_cache": str(cache),
        "hudi_ivy_settings": str(settings),
    }
    service = Service("a", services.db_url, services.root / "a", values)
    services.started["a"] = service
    service.env["HOME"] = str(tmp_path / "home")  # no Maven local repository: nothing cached
    service.start()
    assert service.get("/readyz")["hudi_executor"]["state"] == "absent"

    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "events", "base_path": str(path)},
    )
    submitted = service.post(
        "/v1/hoodie/service/cluster/submit",
        {
            "db_name": "lake",
            "table_name": "events",
            "extra_params": {"small_file_limit": str(1 << 30)},
        },
    )
    operation = service.wait_terminal(submitted["id"], timeout=480)

    assert operation["status"] == "COMPLETED", operation
    assert operation["executed_by"] == "hudi"
    assert FEATURE.declined in operation["native_declined"]
    jar = cache / f"{HUDI_ARTIFACT}-{HUDI_VERSION}.jar"
    assert jar.is_file()
    ready = service.get("/readyz")["hudi_executor"]
    assert ready["available"] and str(jar) in ready["detail"]
    metrics = service.http.get("/metrics").text
    assert 'tms_hudi_bundle_fetches_total{outcome="fetched"} 1.0' in metrics
    assert "fetched Hudi's Spark bundle" in service.server_log.read_text()
    assert sorted(hudi.read(path, COLUMNS)) == before
    assert HudiTable.open(str(path)).timeline().last_clustering() is not None
