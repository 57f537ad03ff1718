from __future__ import annotations

import pytest


@pytest.fixture(params=[6, 9], ids=["v6", "v9"])
def table_version(request: pytest.FixtureRequest) -> int:
    """Every service test runs on a layout 1 table (version 6) and a layout 2 one (version 9)."""
    return int(request.param)
