"""`tms demo`, small: the embedded service, callbacks, policy compaction and a clean on
real Spark, checked by the oracle."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tms.cli import app
from tms.demo import DemoWriter, callback_payload, data_files
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.verify import oracle_snapshot


def test_the_callback_payload_is_what_a_released_hudi_writer_posts(tmp_path: Path) -> None:
    base = str(tmp_path / "trips")
    writer = DemoWriter(base, rows=200, total_commits=3)
    writer.commit()
    upsert, what = writer.commit()
    assert what == "updated 20 trips"

    payload = callback_payload(base, upsert)
    assert set(payload) == {
        "commitTime", "tableName", "basePath", "hoodieWriteStat", "commitActionType",
        "extraMetadata",
    }  # fmt: skip
    assert (payload["commitTime"], payload["tableName"], payload["basePath"]) == (
        upsert,
        "demo_trips",
        base,
    )
    assert payload["commitActionType"] == {"present": True}
    assert payload["extraMetadata"] == {"present": True}
    stats = payload["hoodieWriteStat"]
    assert stats and all(s["prevCommit"] and s["partitionPath"] for s in stats)
    assert all(s["logFiles"] and ".log." in s["path"] for s in stats)  # a merge-on-read update
    assert sum(s["numUpdateWrites"] for s in stats) == 20


@pytest.mark.spark
def test_demo_runs_end_to_end_and_summarises(tmp_path: Path) -> None:
    base = tmp_path / "demo" / "trips"
    result = CliRunner().invoke(
        app,
        [
            "demo",
            "--rows", "400",
            "--rounds", "1",
            "--master", "local[1]",
            "--base-path", str(base),
            "--data-dir", str(tmp_path / "service"),
        ],
    )  # fmt: skip
    out = result.output
    assert result.exit_code == 0, out

    # Progress: registration with a policy, the callbacks, the policy's compaction and
    # clean, each run by the scheduler.
    assert "Registered the table as id 1 with policy" in out
    assert re.search(r"operation 1 compaction: SCHEDULED \(policy: 3 delta commits", out)
    assert "operation 1 compaction: RUNNING, attempt 1" in out
    assert re.search(r"operation 2 clean: SCHEDULED \(policy: 3 commits since the last clean", out)
    assert out.count("oracle (hudi-rs) after") == 1

    summary = out[out.index("\nSummary\n") :]
    # the demo's defaults: Hudi 1.1's table version, with a metadata table as Hudi's writers
    assert "table version 9, with a metadata table" in summary
    assert "commits:       3 delta commits, each with a callback" in summary
    ops = re.findall(r"^\s+(\d+)\s+(\w+)\s+(\d{17})\s+(\w+)\s+(\d+)\s+([\d.]+)s\s+(\d+)\s+(\d+)$",
                     summary, re.MULTILINE)  # fmt: skip
    assert [(o[0], o[1], o[3], o[4]) for o in ops] == [
        ("1", "compaction", "COMPLETED", "1"),
        ("2", "clean", "COMPLETED", "1"),
    ]
    compaction, clean = ops
    assert int(compaction[6]) > 0 and int(clean[7]) > 0  # files written, files deleted
    before, after = map(int, re.findall(r"data files:\s+(\d+) before .*?, (\d+) after", summary)[0])
    assert after == data_files(str(base)) and after < before
    assert "392 rows, 1 check: reads the same before and after every table service" in summary
    # the services kept the metadata table: its delta commits of the compaction and the clean
    reader = MetadataTableReader.open(Storage(str(base)))
    assert {compaction[2], clean[2]} <= {i.requested_time for i in reader.timeline.completed()}
    assert sum(len(files) for files in reader.all_files().values()) == after

    snapshot = oracle_snapshot(str(base))
    assert snapshot.num_rows == 392  # 400 inserted, 8 deleted by the last commit


@pytest.mark.spark
def test_demo_on_a_local_s3_server(tmp_path: Path) -> None:
    """`tms demo --storage s3`: the table lives in a bucket of a local S3 server, registered
    with its storage options; compaction and clean run and hudi-rs reads the same."""
    result = CliRunner().invoke(
        app,
        [
            "demo", "--storage", "s3",
            "--rows", "400", "--rounds", "1", "--master", "local[1]",
            "--data-dir", str(tmp_path / "service"),
        ],
    )  # fmt: skip
    out = result.output
    assert result.exit_code == 0, out
    assert "Started a local S3 server at http://127.0.0.1:" in out
    summary = out[out.index("\nSummary\n") :]
    assert "table:         s3://tms-demo/trips" in summary
    assert re.search(r"1\s+compaction\s+\d{17}\s+COMPLETED", summary)
    assert re.search(r"2\s+clean\s+\d{17}\s+COMPLETED", summary)
    assert "reads the same before and after every table service" in summary
