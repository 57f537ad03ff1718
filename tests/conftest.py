from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.hudi_java.support import HudiRelease, HudiSpark

pytest_plugins = ["tests.db_fixtures"]

# Services the tests start (`tms serve` processes inherit this) read no timelines on their
# own schedule unless a test asks: the pull fallback's tests turn it on.
os.environ.setdefault("TMS_PULL_LISTINGS_PER_MINUTE", "0")

# The JVMs Spark starts for the tests (this process's session, Hudi's sessions, the jobs that
# `tms serve` submits) compile with the client compiler only: each handles a few thousand
# rows and lives seconds to minutes, so the server compiler's work would not pay for itself on
# two shared cores (a Hudi-written table serviced and judged: 49 s instead of 55 s).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


EXTENDED = "TMS_TEST_EXTENDED"
"""Set to 1, the run includes the tests marked `extended` (further variants of scenarios the
default run covers); unset, they are deselected, which keeps the default run within half an
hour on two cores."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The extended variants left out unless asked for; then the tests that run Hudi's own
    Spark first, so the longest ones start early and neither worker ends on one alone."""
    if os.environ.get(EXTENDED) != "1":
        extended = [item for item in items if item.get_closest_marker("extended")]
        if extended:
            config.hook.pytest_deselected(items=extended)
            items[:] = [item for item in items if not item.get_closest_marker("extended")]
    items.sort(key=lambda item: item.get_closest_marker("hudi_java") is None)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession shared by every Spark test (starting one takes seconds)."""
    from tms.spark_runtime import get_spark

    session = get_spark("local[2]", app_name="tms-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def hudi_spark(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[HudiRelease], HudiSpark]]:
    """Hudi's Spark for a release: its bundle fetched (once, into the Maven cache) and a
    SparkSession with it in a child process, started on first use and kept for the run (the
    project's own `spark` session lives on in this process beside it). Shared by the tests
    that run Hudi's code and those that judge a table by Hudi's reader. The newest release's
    session carries a user's own classes too (`tests.hudi_java.user_classes`)."""
    from tests.hudi_java.support import HUDI_1_2, HudiSpark, fetch
    from tests.hudi_java.user_classes import user_classes_jar

    started: dict[HudiRelease, HudiSpark] = {}

    def session(release: HudiRelease) -> HudiSpark:
        if release not in started:
            workdir = tmp_path_factory.mktemp(f"hudi-{release.version}")
            bundle = fetch(release)
            extra = [user_classes_jar(bundle, workdir)] if release == HUDI_1_2 else []
            started[release] = HudiSpark.start(release, bundle, workdir, extra)
        return started[release]

    yield session
    for running in started.values():
        running.close()
