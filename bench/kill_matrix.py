"""The kill matrix: a job SIGKILLed at each step of compaction and clustering, on tables of
versions 6 and 9 with and without a metadata table, through real `tms serve` instances and
spark-submit jobs (`tests/e2e/kill_matrix.py` says what each case checks).

Runs the test module's whole matrix (`KILL_MATRIX=full`) under pytest, whose fixtures start
the database and the services, and prints per case: recovered or not, the attempts, and the
seconds from the submit to the end against the same table's run without a kill (the
baseline, measured in the same run).

    python bench/kill_matrix.py [--select EXPR] [--json-out FILE] [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/e2e/test_kill_matrix.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--select", default="", help="pytest -k expression (a part)")
    parser.add_argument("--json-out", type=Path, help="write the rows as JSON")
    parser.add_argument(
        "--rows", type=Path, help="append each case's row here as it ends (JSON lines)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tms-kill-matrix-") as scratch:
        report = args.rows or Path(scratch) / "rows.jsonl"
        command = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"]
        command += ["--basetemp", str(Path(scratch) / "pt")]
        if args.select:
            command += ["-k", args.select]
        env = {**os.environ, "KILL_MATRIX": "full", "KILL_MATRIX_REPORT": str(report)}
        finished = subprocess.run(command, cwd=ROOT, env=env, check=False)
        rows = (
            [json.loads(line) for line in report.read_text().splitlines()]
            if report.exists()
            else []
        )
    print_matrix(rows)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))
    return 0 if finished.returncode == 0 and rows else 1


def print_matrix(rows: list[dict[str, Any]]) -> None:
    """One line per case: the table, the kill point, recovered, attempts, seconds and their
    ratio to the same service's run on the same kind of table without a kill."""
    baselines = {
        (r["service"], _table(r)): r["seconds"]
        for r in rows
        if r["kill_point"] == "none" and r["recovered"]
    }
    print("| service | table | kill point | recovered | attempts | seconds | ratio to no kill |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        base = baselines.get((r["service"], _table(r)))
        seconds = r.get("seconds")
        shown = f"{seconds:.1f}" if seconds else "-"
        ratio = f"{seconds / base:.2f}" if seconds and base else "-"
        attempts = " → ".join(r.get("attempts", [])) or r.get("error", "")
        recovered = "yes" if r["recovered"] else "NO"
        print(
            f"| {r['service']} | {_table(r)} | {r['kill_point']} | {recovered} | {attempts} "
            f"| {shown} | {ratio} |"
        )
    killed = [r for r in rows if r["kill_point"] != "none"]
    recovered_count = sum(1 for r in killed if r["recovered"])
    print(f"\nrecovered: {recovered_count} of {len(killed)} killed jobs")


def _table(row: dict[str, Any]) -> str:
    mdt = " + metadata table" if row["metadata_table"] else ""
    return f"v{row['table_version']}{mdt}, {row.get('engine', 'spark-submit')}"


if __name__ == "__main__":
    raise SystemExit(main())
