from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ["tests.db_fixtures"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession shared by every Spark test (starting one takes seconds)."""
    from tms.spark_runtime import get_spark

    session = get_spark("local[2]", app_name="tms-tests")
    yield session
    session.stop()
