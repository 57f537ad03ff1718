"""No function of the service's working packages is longer than 60 lines.

A function over 60 lines does several things: its steps want names of their own, and each
step a helper of one concept that can be read, reviewed and tested on its own. That is the
house rule of docs/architecture.md; this test holds `tms.services`, `tms.application`,
`tms.scheduler` and `tms.jobs` to it. Every `def` counts, methods and nested functions
included, from its `def` line to its last line (decorators excluded), as Python's `ast`
measures it (`end_lineno - lineno + 1`). Pure and fast: it only parses source files.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tms"
PACKAGES = ("services", "application", "scheduler", "jobs")
MAX_LINES = 60


@dataclass(frozen=True)
class LongFunction:
    path: str
    line: int
    name: str
    lines: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name} ({self.lines} lines)"


def python_files(folders: Iterable[Path]) -> Iterator[Path]:
    for folder in folders:
        yield from sorted(folder.rglob("*.py"))


def long_functions(
    files: Iterable[Path], relative_to: Path, limit: int = MAX_LINES
) -> list[LongFunction]:
    """Every function of `files` longer than `limit` lines, by path and line."""
    found: list[LongFunction] = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                shown = path.relative_to(relative_to).as_posix()
                found.append(LongFunction(shown, node.lineno, node.name, lines))
    return sorted(found, key=lambda f: (f.path, f.line))


def report(found: Iterable[LongFunction]) -> str:
    return "\n".join(str(f) for f in found)


def test_no_function_is_longer_than_sixty_lines() -> None:
    folders = [SRC / package for package in PACKAGES]
    assert all(folder.is_dir() for folder in folders), folders
    files = list(python_files(folders))
    assert files, "no source files found"
    found = long_functions(files, ROOT)
    assert not found, (
        f"functions over {MAX_LINES} lines (split each into helpers of one concept):\n"
        + report(found)
    )


def test_the_scan_reports_a_function_one_line_too_long(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    statements = [f"x{i} = {i}" for i in range(MAX_LINES)]
    lines = [
        "import functools",
        "",
        "",
        "@functools.cache",  # decorators do not count
        "def too_long() -> int:",  # line 5: 59 statements and a return, 61 lines
        *(f"    {s}" for s in statements[:-1]),
        "    return 0",
        "",
        "",
        "def just_fits() -> int:",  # line 68: 58 statements and a return, 60 lines
        *(f"    {s}" for s in statements[:-2]),
        "    return 0",
        "",
        "",
        "class Holder:",
        "    async def method(self) -> None:",  # line 131: a method of 61 lines
        *(f"        {s}" for s in statements),
    ]
    (package / "long.py").write_text("\n".join(lines) + "\n")
    (package / "short.py").write_text("def short() -> None:\n    pass\n")

    found = long_functions(python_files([package]), tmp_path)

    assert report(found).splitlines() == [
        "pkg/long.py:5 too_long (61 lines)",
        "pkg/long.py:131 method (61 lines)",
    ]
