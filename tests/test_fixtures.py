"""The tests carry their own data: every fixture the README lists is in the repository, and
no test names a path outside it (a clone of the repository alone passes the suite)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fixture_paths import FIXTURES, HFILES, HUDI_TABLES

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
_PARENTS = re.compile(r"parents\[(\d+)\]")


def test_every_listed_fixture_is_in_the_repository() -> None:
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", (FIXTURES / "README.md").read_text(), re.M))
    assert len(listed) == 5
    for name in listed:
        assert (HUDI_TABLES / f"{name}.zip").is_file(), name
        assert (HUDI_TABLES / f"{name}.sql").is_file(), name
    assert len(list(HFILES.glob("*.hfile"))) == 9
    assert FIXTURES.resolve().is_relative_to(ROOT)


def test_no_test_reads_outside_the_repository() -> None:
    """`Path(__file__).parents[k]` may climb to the repository's root, not above it; no
    test names the folder beside the repository that a clone does not have."""
    offenders: list[str] = []
    for source in sorted(TESTS.rglob("*.py")):
        text = source.read_text()
        root_index = len(source.relative_to(ROOT).parts) - 1  # parents[root_index] is ROOT
        for match in _PARENTS.finditer(text):
            if int(match[1]) > root_index:
                offenders.append(f"{source.relative_to(ROOT)}: {match[0]}")
        if source.name != Path(__file__).name and re.search(r"[\"'/]shared[\"'/]", text):
            offenders.append(f"{source.relative_to(ROOT)}: names shared/")
    assert offenders == []
