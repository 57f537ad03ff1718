"""Completion times of the view's instants as Hudi 1.x's timeline server reports them: on
layout 1 (table version 6) the completed instant file's modification time, in local time; on
layout 2 the time the completed instant file names."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from tests.view.conftest import own_table
from tms.hudi.table import HudiTable
from tms.view.completion_times import instant_time_of, load_timeline, with_completion_times
from tms.view.visible_timeline import instant_dto, visible_instants


def test_a_modification_time_is_formatted_as_hudi_formats_a_date() -> None:
    moment = datetime(2026, 11, 27, 4, 31, 58, 997000)
    assert instant_time_of(moment.timestamp()) == "20261127043158997"
    # Java reads the millisecond, truncated
    assert instant_time_of(moment.timestamp() + 0.0009) == "20261127043158997"


def test_layout_1_instants_complete_at_their_completed_files_modification_time(
    tmp_path: Path,
) -> None:
    root = tmp_path / "v6"
    own_table(root, 6)
    table = HudiTable.open(str(root))
    first = table.timeline().completed()[0]
    completed_file = root / ".hoodie" / f"{first.requested_time}.{first.action.value}"
    moment = datetime(2026, 11, 27, 4, 40, 7, 123000)
    os.utime(completed_file, (moment.timestamp(), moment.timestamp()))

    timeline, times = load_timeline(table)
    visible = with_completion_times(visible_instants(timeline), times)
    assert timeline.storage is table.storage  # the listing's recorder is not kept
    assert visible[0].completion_time == "20261127044007123"
    assert all(i.completion_time for i in visible if i.is_completed)
    dto = instant_dto(visible[0])
    assert (dto["requestedTime"], dto["completionTime"]) == (dto["ts"], "20261127044007123")


def test_layout_2_instants_keep_the_completion_time_their_file_names(tmp_path: Path) -> None:
    root = tmp_path / "v9"
    own_table(root, 9)
    table = HudiTable.open(str(root))
    timeline, times = load_timeline(table)
    assert times == {}
    named = {
        name.split("_")[0]: name.split("_")[1].split(".")[0]
        for name in os.listdir(root / ".hoodie" / "timeline")
        if "_" in name
    }
    visible = with_completion_times(visible_instants(timeline), times)
    assert {i.requested_time: i.completion_time for i in visible} == named
