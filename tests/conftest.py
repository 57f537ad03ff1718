from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ["tests.db_fixtures"]

# Services the tests start (`tms serve` processes inherit this) read no timelines on their
# own schedule unless a test asks: the pull fallback's tests turn it on.
os.environ.setdefault("TMS_PULL_LISTINGS_PER_MINUTE", "0")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession shared by every Spark test (starting one takes seconds)."""
    from tms.spark_runtime import get_spark

    session = get_spark("local[2]", app_name="tms-tests")
    yield session
    session.stop()
