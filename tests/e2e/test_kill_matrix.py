"""Jobs SIGKILLed at each step of a table service recover on their next attempt
(`tests.e2e.kill_matrix`). The default suite runs the steps that lose the most on tables with
a metadata table; `bench/kill_matrix.py` runs the whole matrix (`KILL_MATRIX=full`) and
prints it."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Services
from tests.e2e.kill_matrix import ENGINES, NO_KILL, SERVICES, Case, run_case
from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark

pytestmark = [pytest.mark.spark, pytest.mark.hudi_java]

DEFAULT = [
    Case("compaction", 9, True, "metadata committed, before the data commit"),
    Case("clustering", 6, True, "tasks writing", "spark-worker"),
    Case("metadata clean", 9, True, "tasks writing"),
]
"""The default suite's cases: a job killed under the table lock, a resident worker killed
among written files (the service starts it again), and a job killed while the metadata
table's clean deletes files, after its compaction committed (the retry finishes it)."""
FULL = [
    Case(service, version, mdt, step, engine)
    for service, version, mdt, engine in itertools.product(SERVICES, (6, 9), (True, False), ENGINES)
    if mdt or not SERVICES[service].needs_metadata_table
    for step in [NO_KILL, *SERVICES[service].steps(mdt)]
]
"""The whole matrix, with a baseline case (no kill) for each service, table and engine."""
CASES = FULL if os.environ.get("KILL_MATRIX") == "full" else DEFAULT


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_a_job_killed_at_a_step_recovers(
    services: Services,
    tmp_path: Path,
    case: Case,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
) -> None:
    try:
        outcome = run_case(services, tmp_path, case, hudi_spark(HUDI_1_2))
    except AssertionError as exc:
        _report({**asdict(case), "recovered": False, "error": str(exc).partition("\n")[0]})
        raise
    print(f"{case.name}: {' -> '.join(outcome.attempts)} in {outcome.seconds:.1f}s")
    _report(outcome.row())


def _report(row: dict[str, Any]) -> None:
    """One line of the matrix, for `bench/kill_matrix.py` (`KILL_MATRIX_REPORT`)."""
    report = os.environ.get("KILL_MATRIX_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
