"""What a user installs (`pip install tms`, no extras) is enough to import every module of
`tms`: a module that imports a package only the test or dev extras bring would make every
`tms` command fail on a user's machine while the suite, which has the extras, stays green.

The runtime set is read from the installed distribution's own metadata (its requirements
without extras, followed transitively), so it is what pip installed for `pip install tms`.
Every module under `src/tms` is then imported in a fresh interpreter in which any other
installed package cannot be imported; and every import statement, at module level or in a
function, is checked to name the runtime set or a user-facing extra (`gcs`, `azure`,
`s3-demo`), never a test-only package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "tms"
TEST_EXTRAS = frozenset({"test", "dev"})


def _name(distribution: str) -> str:
    return distribution.lower().replace("_", "-").replace(".", "-")


def _closure(requirements: list[tuple[str, frozenset[str]]]) -> set[str]:
    """Distributions `requirements` install, transitively, each with the extras named."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(requirements)
    names: set[str] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement whose marker excludes this platform
        names.add(_name(dist.metadata["Name"]))
        for text in dist.requires or []:
            requirement = Requirement(text)
            wanted = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker is not None and not any(
                requirement.marker.evaluate(env) for env in wanted
            ):
                continue
            todo.append((requirement.name, frozenset(requirement.extras)))
    return names


def _requirements_of(extras: set[str]) -> list[tuple[str, frozenset[str]]]:
    """tms's own requirements: the runtime ones, or those of `extras` alone."""
    found = []
    for text in metadata.requires(PACKAGE) or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if extras:
            if marker is None or not any(marker.evaluate({"extra": e}) for e in extras):
                continue
        elif marker is not None and not marker.evaluate({"extra": ""}):
            continue
        if _name(requirement.name) == PACKAGE:
            continue
        found.append((requirement.name, frozenset(requirement.extras)))
    return found


def _top_level_owners() -> dict[str, set[str]]:
    """Importable top-level names, each with the distributions that install it."""
    owners: dict[str, set[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        owners.setdefault(top, set()).update(_name(d) for d in dists)
    return owners


def runtime_distributions() -> set[str]:
    return _closure(_requirements_of(set())) | {PACKAGE}


def user_extras() -> set[str]:
    extras = set(metadata.metadata(PACKAGE).get_all("Provides-Extra") or [])
    return extras - TEST_EXTRAS


def _third_party(top: str) -> bool:
    return top not in sys.stdlib_module_names and top != PACKAGE and top != "__future__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """Top-level names of every absolute import in `path`, with their lines."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def test_the_runtime_set_is_read_from_the_installed_metadata() -> None:
    runtime = runtime_distributions()
    # the service's own stack is there, and nothing that only the tests install
    assert {"pyspark", "pyarrow", "sqlalchemy", "fastapi", "numpy"} <= runtime
    assert not {"pytest", "selenium", "schemathesis", "moto", "ruff", "mypy"} & runtime


def test_every_import_names_a_runtime_dependency_or_a_user_extra() -> None:
    owners = _top_level_owners()
    allowed = runtime_distributions() | _closure(_requirements_of(user_extras()))
    wrong: list[str] = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        for line, top in _imports(path):
            if not _third_party(top):
                continue
            dists = owners.get(top, set())
            if not dists & allowed:
                where = path.relative_to(SRC)
                wrong.append(f"{where}:{line} imports {top} ({', '.join(sorted(dists)) or '?'})")
    assert not wrong, "imports of packages no runtime dependency installs:\n" + "\n".join(wrong)


IMPORT_ALL = SRC.parent / "scripts" / "import_all.py"


def test_every_module_imports_with_the_runtime_dependencies_alone() -> None:
    runtime = runtime_distributions()
    blocked = sorted(
        top
        for top, dists in _top_level_owners().items()
        if _third_party(top) and not dists & runtime
    )
    assert "pytest" in blocked and "selenium" in blocked  # what the tests alone install
    done = subprocess.run(
        [sys.executable, str(IMPORT_ALL), "--block", ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=SRC.parent,
    )
    assert done.returncode == 0, (
        "modules that need more than the runtime dependencies:\n" + done.stderr[-5000:]
    )
    assert " 0 failed" in done.stdout and int(done.stdout.split()[0]) > 100
