"""Hudi's Spark bundle obtained on first need, into an empty cache: by Spark's own package
resolution from Maven Central, from a mirror an Ivy settings file names, and refused with the
one line that says what to do when it cannot be had."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.hudi_java.bundle_mirror import ivy_settings, make_mirror
from tms.config import Settings
from tms.engines.hudi_bundle import bundle_fetcher
from tms.spark_runtime.hudi_bundle import (
    HUDI_ARTIFACT,
    HUDI_VERSION,
    BundleFetcher,
    BundleSource,
    cached_bundle,
    fetch,
    hudi_jars,
)


@pytest.fixture
def no_maven_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty Maven local repository, and a Maven (where one is installed) set offline by
    the user's own settings: only Spark's package resolution can fetch."""
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text("<settings><offline>true</offline></settings>\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={home}")  # Java reads home from passwd
    monkeypatch.setenv("TMS_MAVEN_CACHE", str(tmp_path / "empty-maven"))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mirror(tmp_path_factory.mktemp("mirror"))


@pytest.mark.spark
def test_an_empty_cache_is_filled_from_the_mirror_an_ivy_settings_file_names(
    tmp_path: Path, mirror: Path, no_maven_cache: None
) -> None:
    cache = tmp_path / "hudi"
    source = BundleSource(cache=cache, ivy_settings=str(ivy_settings(tmp_path / "i.xml", mirror)))
    assert cached_bundle(source) is None and hudi_jars(None, source) == []

    jar = fetch(source)

    assert jar == cache / f"{HUDI_ARTIFACT}-{HUDI_VERSION}.jar"
    assert hudi_jars(None, source) == [str(jar)]
    with zipfile.ZipFile(jar) as archive:
        assert "org/apache/spark/sql/hudi/HoodieSparkSessionExtension.class" in archive.namelist()
    assert not list(cache.glob(".*.part"))  # nothing half-written left beside it


@pytest.mark.spark
def test_a_bundle_that_cannot_be_fetched_leaves_the_executor_unavailable_with_what_to_do(
    tmp_path: Path, no_maven_cache: None
) -> None:
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    source = BundleSource(
        cache=tmp_path / "hudi", ivy_settings=str(ivy_settings(tmp_path / "i.xml", empty))
    )
    bundle = BundleFetcher(source)
    told: list[tuple[bool, str]] = []
    bundle.listeners.append(lambda ok, _seconds, what: told.append((ok, what)))
    assert bundle.status().state == "absent"

    assert bundle.jars(None, wait=None) == []

    status = bundle.status()
    assert status.state == "unavailable" and not status.available
    assert "Spark's package resolution could not fetch" in status.detail
    assert "TMS_HUDI_JARS" in status.detail
    assert told and told[0][0] is False
    # a failure is not fetched again at every launch
    assert bundle.start() is None


def test_configured_jars_need_no_fetch(tmp_path: Path, no_maven_cache: None) -> None:
    bundle = BundleFetcher(BundleSource(cache=tmp_path / "hudi", fetch=False))
    assert bundle.status().state == "unavailable"
    assert "fetching is off" in bundle.status().detail
    assert bundle.jars("/opt/a.jar, /opt/b.jar", wait=0) == ["/opt/a.jar", "/opt/b.jar"]
    assert bundle.status("/opt/a.jar").available
    assert bundle.jars(None, wait=0) == []  # fetching is off: nothing is fetched
    assert not (tmp_path / "hudi").exists()


@pytest.mark.spark
@pytest.mark.hudi_java
def test_the_service_fetches_from_maven_central_into_an_empty_cache(
    tmp_path: Path, no_maven_cache: None
) -> None:
    """What a user's first `auto` operation does on a fresh install: Spark resolves the
    bundle from Maven Central (the registry this machine reaches) into the cache."""
    settings = Settings(hudi_cache=tmp_path / "hudi")
    bundle = bundle_fetcher(settings)
    assert bundle.status().state == "absent"

    jars = bundle.jars(None, wait=None)

    assert jars == [str(tmp_path / "hudi" / f"{HUDI_ARTIFACT}-{HUDI_VERSION}.jar")]
    assert Path(jars[0]).stat().st_size > 50_000_000
    assert bundle.status().available
