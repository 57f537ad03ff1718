"""What Hudi's index executor does with an `indexing` instant a crashed run left inflight,
before Hudi's code runs: completed when its partitions were already listed built (Hudi lists
them right before it completes the instant), else undone back to its plan. Pure storage
steps: the Spark here carries no Hudi, which the executor refuses only after them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.hudi.test_indexing import files_of, own_table
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.indexing import mark_inflight
from tms.hudi.properties import METADATA_PARTITIONS, TableConfig
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import transition
from tms.services.apache_hudi.indexer import HudiIndexExecutor
from tms.services.index import build as index

NO_HUDI: Any = SimpleNamespace(
    sparkContext=SimpleNamespace(getConf=lambda: SimpleNamespace(get=lambda key, default: ""))
)
"""A Spark with no Hudi bundle on it: Hudi's executor refuses it."""


def crashed_build(root: Path) -> tuple[HudiTable, str]:
    """A record index build a crashed run left inflight, its partition listed inflight and
    a file of it written."""
    own_table(root)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["record_index"])
    assert instant_time is not None
    requested = table.timeline().get(instant_time)
    assert requested is not None
    transition(table.storage, table.config, requested, State.INFLIGHT)
    mark_inflight(table.storage, ["record_index"])
    table.storage.write_bytes(".hoodie/metadata/record_index/record-index-0000-0_x.hfile", b"x")
    return HudiTable.open(str(root)), instant_time


def test_a_build_listed_built_is_completed_without_running_hudi(tmp_path: Path) -> None:
    table, instant_time = crashed_build(tmp_path / "t")
    props = dict(table.config.props)
    props[METADATA_PARTITIONS] = "files,record_index"
    TableConfig(props).save(table.storage)

    result = HudiIndexExecutor().execute(NO_HUDI, HudiTable.open(table.base_path), instant_time)

    assert result.state == "COMPLETED" and result.rolled_back == []
    after = HudiTable.open(table.base_path)
    completed = after.timeline().get(instant_time)
    assert completed is not None and completed.is_completed
    assert completed.action is Action.INDEXING
    assert "record_index" in after.config.metadata_partitions


def test_a_build_not_listed_built_is_undone_back_to_its_plan(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table, instant_time = crashed_build(root)

    with pytest.raises(UnsupportedTableError, match="Hudi's Spark bundle"):
        HudiIndexExecutor().execute(NO_HUDI, table, instant_time)

    after = HudiTable.open(str(root))
    pending = after.timeline().get(instant_time)
    assert pending is not None and pending.state is State.REQUESTED  # the plan stays
    assert after.config.get("hoodie.table.metadata.partitions.inflight") == ""
    assert "record_index" not in after.config.metadata_partitions
    assert not any(name.startswith(".hoodie/metadata/record_index/") for name in files_of(root))
