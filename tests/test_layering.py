"""The layering written in docs/architecture.md holds in the code.

The table "Who may import whom" in the architecture document is the single statement of the
rules; this test reads it and checks every `tms` import in `src/tms` against it (imports under
`TYPE_CHECKING` and inside functions count too). A module belongs to the most specific row that
names it (`hudi.timeline` before `hudi`); a name in a row's last column admits that unit and
every unit below it (`hudi` admits `hudi.timeline`). A second check keeps SQL inside
`tms.store`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tms"
DOC = ROOT / "docs" / "architecture.md"

SQL_BUILDERS = frozenset({"select", "insert", "update", "delete", "text", "func", "literal"})
"""SQLAlchemy constructs that write SQL; outside `tms.store` they mean SQL outside the store."""
STATEMENT_CALLS = frozenset({"execute", "scalars", "scalar", "exec_driver_sql"})
"""Methods that run a statement, when called on a session or a connection."""
_DATABASE_HANDLE = re.compile(r"(session|connection|conn)$")

_ROW = re.compile(r"^\|\s*`([\w.]+)`\s*\|(?P<owns>[^|]*)\|(?P<may>[^|]*)\|\s*$")
_NAME = re.compile(r"`([\w.]+)`")


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    what: str
    reason: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} {self.what}: {self.reason}"


def read_layers(document: str) -> dict[str, frozenset[str]]:
    """The rows of the "Who may import whom" table: unit -> the units it may import."""
    section = document.split("## Who may import whom", 1)
    assert len(section) == 2, "docs/architecture.md lost its 'Who may import whom' section"
    layers: dict[str, frozenset[str]] = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        match = _ROW.match(line.strip())
        if match:
            layers[match.group(1)] = frozenset(_NAME.findall(match.group("may")))
    return layers


def unit_of(module: str, layers: Mapping[str, object]) -> str | None:
    """The most specific row naming `module` (a dotted name below `tms`), or None."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in layers:
            return candidate
    return None


def module_name(path: Path) -> str:
    relative = path.relative_to(SRC).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name below `tms`) of every import of ours in `source`."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tms."):
                    yield node.lineno, alias.name[len("tms.") :]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module == "tms":
                for alias in node.names:
                    yield node.lineno, alias.name
                continue
            elif node.module and node.module.startswith("tms."):
                target = node.module[len("tms.") :]
            else:
                continue
            yield node.lineno, target


def layering_violations(
    sources: Mapping[str, tuple[str, bool]], layers: Mapping[str, frozenset[str]]
) -> list[Violation]:
    """Every import in `sources` (module -> (source, is_package)) that its row does not allow."""
    found: list[Violation] = []
    for module, (source, is_package) in sorted(sources.items()):
        own = unit_of(module, layers)
        if own is None:
            found.append(Violation(module, 0, "-", "no row of the table names this module"))
            continue
        for line, target in imported_modules(source, module, is_package):
            other = unit_of(target, layers)
            if other is None or other == own:
                continue
            if not any(other == name or other.startswith(name + ".") for name in layers[own]):
                found.append(
                    Violation(module, line, f"imports {target}", f"{own} may not import {other}")
                )
    return found


def sql_outside_store(sources: Mapping[str, tuple[str, bool]]) -> list[Violation]:
    """Imports of SQL-writing SQLAlchemy constructs in modules outside `tms.store`."""
    found: list[Violation] = []
    for module, (source, _) in sorted(sources.items()):
        if module == "store" or module.startswith("store."):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                for alias in node.names:
                    if alias.name in SQL_BUILDERS:
                        found.append(
                            Violation(
                                module,
                                node.lineno,
                                f"imports {alias.name}",
                                "SQL belongs in tms.store",
                            )
                        )
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in STATEMENT_CALLS
                and isinstance(node.func.value, ast.Name)
                and _DATABASE_HANDLE.search(node.func.value.id)
            ):
                name = f"{node.func.value.id}.{node.func.attr}"
                found.append(
                    Violation(module, node.lineno, f"calls {name}", "SQL belongs in tms.store")
                )
    return found


def our_sources() -> dict[str, tuple[str, bool]]:
    return {
        module_name(path): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in SRC.rglob("*.py")
        if module_name(path) not in ("", "__main__")
    }


def test_every_import_follows_the_documented_layers() -> None:
    layers = read_layers(DOC.read_text(encoding="utf-8"))
    violations = layering_violations(our_sources(), layers)
    assert not violations, "imports that break docs/architecture.md:\n" + "\n".join(
        map(str, violations)
    )


def test_every_row_may_import_only_rows_of_the_table() -> None:
    layers = read_layers(DOC.read_text(encoding="utf-8"))
    unknown = {f"{unit} -> {name}" for unit, may in layers.items() for name in may - set(layers)}
    assert not unknown, f"the table names units it has no row for: {sorted(unknown)}"


def test_no_sql_outside_the_store() -> None:
    violations = sql_outside_store(our_sources())
    assert not violations, "\n".join(map(str, violations))


def test_the_checker_catches_an_upward_import() -> None:
    """A service-side import from the table layer and SQL in a route are both reported."""
    layers = {
        "hudi": frozenset[str](),
        "store": frozenset({"hudi"}),
        "api": frozenset({"store"}),
        "scheduler": frozenset({"store"}),
    }
    sources = {
        "hudi.table": ("from tms.store.models import Tbl\n", False),
        "hudi.storage": ("from . import table\nfrom tms import api\n", False),
        "store.tables": ("from tms.hudi.table import HudiTable\n", False),
        "api.routes": ("from sqlalchemy import select\nfrom tms.store import tables\n", False),
        "scheduler.loop": ("def f(session):\n    session.execute(q)\n    self.execute(q)\n", False),
    }
    assert [str(v) for v in layering_violations(sources, layers)] == [
        "hudi.storage:2 imports api: hudi may not import api",
        "hudi.table:1 imports store.models: hudi may not import store",
    ]
    assert [str(v) for v in sql_outside_store(sources)] == [
        "api.routes:1 imports select: SQL belongs in tms.store",
        "scheduler.loop:2 calls session.execute: SQL belongs in tms.store",
    ]
    assert unit_of("hudi.timeline.instant", {"hudi": 1, "hudi.timeline": 1}) == "hudi.timeline"
