"""What `tms run` shows on a terminal: its stages and file groups as they change, its wall
time next to the plan's execution time, and none of Spark's output, which goes to the log
file it names. A process of its own, since Spark's JVM writes to the process's stderr."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.crash import TMS
from tms.demo import DemoWriter

STAGE = re.compile(r"^\[\s*(\d+\.\d)s\] compaction: (.*)$")


@pytest.mark.spark
def test_tms_run_prints_its_stages_and_wall_time_and_keeps_sparks_output_in_its_log(
    tmp_path: Path,
) -> None:
    base = tmp_path / "trips"
    writer = DemoWriter(str(base), rows=200, total_commits=3, table_version=9)
    for _ in range(3):
        writer.commit()

    done = subprocess.run(
        [*TMS, "run", "compaction", "--base-path", str(base), "--master", "local[1]"],
        cwd=tmp_path,  # the default log file is under the working directory's .tms
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    # Spark's output is in the named log file, none of it on the terminal
    assert done.stderr == ""
    assert " WARN " not in done.stdout
    (log_file,) = (tmp_path / ".tms" / "logs" / "run").glob("compaction-*.log")
    assert re.search(r"^\S+ \S+ WARN \w+: ", log_file.read_text(), re.MULTILINE)

    lines = done.stdout.splitlines()
    stages = [STAGE.match(line) for line in lines]
    shown = [m.group(2) for m in stages if m]
    result = dict(
        re.findall(r"^\s*(\w+): (\S+)", "\n".join(line for line in lines if not STAGE.match(line)),
                   re.MULTILINE)
    )  # fmt: skip
    groups = int(result["file_groups"])
    assert groups == 4  # one per city
    assert shown[:2] == ["planning", f"starting Spark (local[1]; its output goes to {log_file})"]
    assert f"compacting, 0/{groups} file groups" in shown
    assert shown[-1] == f"committing, {groups}/{groups} file groups"
    assert result["log_file"] == str(log_file)

    # the wall time covers the whole command: the stages and the plan's execution in it
    wall, execution = float(result["wall_seconds"]), float(result["duration_seconds"])
    times = [float(m.group(1)) for m in stages if m]
    assert times == sorted(times) and times[-1] <= round(wall, 1)  # as printed
    assert execution <= wall
    assert "(the whole command: opening the table, planning, starting Spark" in done.stdout
