from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.hudi_java.support import HudiRelease, HudiSpark, fetch


@pytest.fixture(scope="session")
def hudi_spark(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[HudiRelease], HudiSpark]]:
    """Hudi's Spark for a release: its bundle fetched (once, into the Maven cache) and a
    SparkSession with it in a child process, started on first use and kept for the run (the
    project's own `spark` session lives on in this process beside it)."""
    started: dict[HudiRelease, HudiSpark] = {}

    def session(release: HudiRelease) -> HudiSpark:
        if release not in started:
            workdir = tmp_path_factory.mktemp(f"hudi-{release.version}")
            started[release] = HudiSpark.start(release, fetch(release), workdir)
        return started[release]

    yield session
    for running in started.values():
        running.close()
