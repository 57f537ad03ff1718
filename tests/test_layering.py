"""The layering written in docs/architecture.md holds in the code.

The table "Who may import whom" in the architecture document is the single statement of the
rules; this test reads it and checks every `tms` import in `src/tms` against it (imports under
`TYPE_CHECKING` and inside functions count too). A module belongs to the most specific row that
names it (`hudi.timeline` before `hudi`); a name in a row's last column admits that unit and
every unit below it (`hudi` admits `hudi.timeline`); the column names units, never a reason in
parentheses. Further checks keep SQL inside `tms.store`, find import cycles between modules of
`tms` (every import outside function bodies, those under `TYPE_CHECKING` included: a cycle in
the types is one in the design), and refuse imports of `tms` inside function bodies, but for
the few listed in `LAZY_IMPORTS`, each deferring a heavy import with its reason.
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

_COMMAND_ONLY = (
    "the service and the store bring FastAPI, uvicorn, SQLAlchemy and Alembic (over a second); "
    "every `tms` subcommand imports `cli.serve`; only `tms serve` and `tms db upgrade` need them"
)
LAZY_IMPORTS: Mapping[tuple[str, str], str] = {
    ("cli.serve", "serve"): _COMMAND_ONLY,
    ("cli.serve", "store"): _COMMAND_ONLY,
    ("cli.demo", "demo"): "the demo brings the service, the sample writer and the S3 server; "
    "every `tms` subcommand imports `cli.demo`, only `tms demo` needs them",
}
"""(module, imported module) -> why the import waits for the function that needs it."""


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


def read_rows(document: str) -> dict[str, str]:
    """The rows of the "Who may import whom" table: unit -> its "may import" column."""
    section = document.split("## Who may import whom", 1)
    assert len(section) == 2, "docs/architecture.md lost its 'Who may import whom' section"
    rows: dict[str, str] = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        match = _ROW.match(line.strip())
        if match:
            rows[match.group(1)] = match.group("may").strip()
    return rows


def read_layers(document: str) -> dict[str, frozenset[str]]:
    """The rows of the "Who may import whom" table: unit -> the units it may import."""
    return {unit: frozenset(_NAME.findall(may)) for unit, may in read_rows(document).items()}


def unit_of(module: str, layers: Mapping[str, object]) -> str | None:
    """The most specific row naming `module` (a dotted name below `tms`), or None; with
    modules for rows, the module a dotted name is or lives in."""
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
    for node, _ in import_statements(ast.parse(source)):
        for target in imported_names(node, module, is_package, names=False):
            yield node.lineno, target


def import_statements(
    tree: ast.AST, in_function: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in `tree`, and whether it sits in a function body."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
        else:
            body = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from import_statements(child, in_function or body)


def imported_names(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, *, names: bool
) -> list[str]:
    """The dotted names below `tms` one import statement reads: the modules it imports from,
    and with `names` the names it takes from them (`a.b.c` for `from a.b import c`, which is
    a module when `c` is one)."""
    if isinstance(node, ast.Import):
        return [alias.name[len("tms.") :] for alias in node.names if alias.name.startswith("tms.")]
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1]
        target = ".".join([*base, *(node.module.split(".") if node.module else [])])
    elif node.module == "tms":
        return [alias.name for alias in node.names]
    elif node.module and node.module.startswith("tms."):
        target = node.module[len("tms.") :]
    else:
        return []
    if not names:
        return [target]
    return [f"{target}.{alias.name}" if target else alias.name for alias in node.names]


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


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports when it is imported (outside function
    bodies, `TYPE_CHECKING` included). A package a submodule lives in is not an edge of its
    own: Python has it imported before the submodule runs."""
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        edges = graph.setdefault(module, set())
        for node, in_function in import_statements(ast.parse(source)):
            if in_function:
                continue
            for name in imported_names(node, module, is_package, names=True):
                target = unit_of(name, sources)
                if target is not None and target != module:
                    edges.add(target)
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (`a`, `b`, ..., `a`) through each group of modules that import each other,
    found as the strongly connected components of `graph` (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in order:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], order[other])
        if low[node] == order[node]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return sorted(_cycle_in(group, graph) for group in groups)


def _cycle_in(group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """The shortest cycle from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for other in sorted(graph[node] & group):
                if other == start:
                    return [*paths[node], start]
                if other not in paths:
                    paths[other] = [*paths[node], other]
                    following.append(other)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def imports_in_functions(sources: Mapping[str, tuple[str, bool]]) -> list[Violation]:
    """Imports of `tms` modules inside function bodies (`import tms` itself included)."""
    found: list[Violation] = []
    for module, (source, is_package) in sorted(sources.items()):
        for node, in_function in import_statements(ast.parse(source)):
            if not in_function:
                continue
            if isinstance(node, ast.Import) and any(a.name == "tms" for a in node.names):
                found.append(Violation(module, node.lineno, "imports tms", "inside a function"))
            targets = {
                unit_of(name, sources) or name
                for name in imported_names(node, module, is_package, names=True)
            }
            for target in sorted(targets):
                found.append(
                    Violation(module, node.lineno, f"imports {target}", "inside a function")
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


def test_the_table_permits_units_not_exceptions() -> None:
    """A row's "may import" names units; a reason in parentheses marks an exception."""
    rows = read_rows(DOC.read_text(encoding="utf-8"))
    explained = {unit: may for unit, may in rows.items() if "(" in may}
    assert not explained, f"rows that carry an exception: {explained}"


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph(our_sources()))
    assert not cycles, "modules of tms that import each other:\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles
    )


def test_no_imports_of_ours_inside_functions_but_the_lazy_ones() -> None:
    found = imports_in_functions(our_sources())
    listed = {(v.module, v.what.removeprefix("imports ")) for v in found}
    unlisted = [
        str(v) for v in found if (v.module, v.what.removeprefix("imports ")) not in LAZY_IMPORTS
    ]
    assert not unlisted, "import these at the top of the module:\n" + "\n".join(unlisted)
    stale = sorted(set(LAZY_IMPORTS) - listed)
    assert not stale, f"LAZY_IMPORTS names imports that are gone: {stale}"


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


def test_the_checker_finds_cycles_and_imports_in_functions() -> None:
    sources = {
        "a": ("from tms import b\n", False),
        "b": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tms.c.d import X\n",
            False,
        ),
        "c": ("from tms.c.d import X\n", True),
        "c.d": ("from tms.a import f\n", False),
        "e": ("def f():\n    from tms.c import d\n    import tms\n", False),
        "f": ("from tms.e import f\n", False),
    }
    assert import_cycles(import_graph(sources)) == [["a", "b", "c.d", "a"]]
    assert [str(v) for v in imports_in_functions(sources)] == [
        "e:2 imports c.d: inside a function",
        "e:3 imports tms: inside a function",
    ]
