"""What `tms demo` checks before it does anything: every option, and that the folders it
clears are its own.

The demo deletes and rewrites its table (`--base-path`) and its service state
(`--data-dir`) on every run. Bad input must cost nothing, so all of it is refused before the
first folder is touched, with one line saying why; and a folder holding anything the demo
did not write (another table, someone's files) is never deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tms.demo.options import DemoOptions, DemoRefused
from tms.demo.s3 import require_s3_server
from tms.hudi.properties import TABLE_NAME, parse_properties
from tms.testing.sample_writer.new_table import TABLE_VERSIONS

__all__ = [
    "DEMO_TABLE_NAME",
    "DEMO_TABLE_VERSIONS",
    "MIN_ROWS",
    "check_base_path",
    "check_data_dir",
    "check_options",
    "clear_data_dir",
]

DEMO_TABLE_NAME = "demo_trips"
"""`hoodie.table.name` of the demo's table: a table with another name is not the demo's."""
DEMO_TABLE_VERSIONS = TABLE_VERSIONS
"""The versions the project's writer creates (6, 8, 9); 7 is read and served, not written."""
MIN_ROWS = 100
STORAGES = ("local", "s3")
ENGINES = ("spark-worker", "spark-submit")
DATA_DIR_MARKER = ".tms-demo"
"""Written into the data dir the demo creates: the sign that it may clear it next time."""
_SERVICE_STATE = frozenset({"pg", "logs", "py-files", "demo.log", DATA_DIR_MARKER})
"""What a demo's data dir holds (embedded PostgreSQL, job logs, the jobs' package, its log)."""


_HUDI = {6: "Hudi 0.14/0.15", 8: "Hudi 1.0", 9: "Hudi 1.1"}


def _versions() -> str:
    *first, last = (f"{v} ({_HUDI.get(v, 'Hudi')})" for v in DEMO_TABLE_VERSIONS)
    return f"{', '.join(first)} or {last}"


def check_options(options: DemoOptions) -> None:
    """Refuse options the demo cannot run with, before anything is started or deleted."""
    if options.table_version not in DEMO_TABLE_VERSIONS:
        raise DemoRefused(
            f"--table-version {options.table_version}: the demo creates its table as "
            f"version {_versions()}"
        )
    if options.rows < MIN_ROWS:
        raise DemoRefused(f"--rows {options.rows}: at least {MIN_ROWS} trips")
    if options.rounds < 1:
        raise DemoRefused(f"--rounds {options.rounds}: at least 1")
    if not options.master.strip():
        raise DemoRefused("--master: name a Spark master, e.g. local[*]")
    if options.storage not in STORAGES:
        raise DemoRefused(f"--storage {options.storage}: local or s3")
    if options.engine not in ENGINES:
        raise DemoRefused(f"--engine {options.engine}: spark-worker or spark-submit")
    if options.storage == "s3":
        require_s3_server()
    else:
        check_base_path(options.base_path)
    check_data_dir(options.data_dir)


def check_base_path(base_path: Path) -> None:
    """The demo may (re)write its table here: nothing there, an empty folder, or a table
    the demo wrote before (named `demo_trips`)."""
    path = base_path.expanduser().absolute()
    if not path.exists():
        return
    if not path.is_dir():
        raise DemoRefused(f"--base-path {path} is a file: the demo writes a table folder there")
    if not any(path.iterdir()):
        return
    properties = path / ".hoodie" / "hoodie.properties"
    try:
        name = parse_properties(properties.read_text(encoding="iso-8859-1")).get(TABLE_NAME)
    except OSError:
        name = None
    if name == DEMO_TABLE_NAME:
        return
    what = f"the Hudi table {name}" if name else "files that are not a demo table"
    raise DemoRefused(
        f"--base-path {path} holds {what}: the demo deletes and rewrites its table there, "
        "so choose another path"
    )


def check_data_dir(data_dir: Path) -> None:
    """The demo may clear its service state here: nothing there, an empty folder, or a
    folder a demo made (its marker, or only what a demo service keeps)."""
    path = data_dir.expanduser().absolute()
    if not path.exists():
        return
    if not path.is_dir():
        raise DemoRefused(f"--data-dir {path} is a file: the demo keeps its service state there")
    names = {entry.name for entry in path.iterdir()}
    if DATA_DIR_MARKER in names or names <= _SERVICE_STATE:
        return
    raise DemoRefused(
        f"--data-dir {path} holds files the demo did not write: it clears that folder on "
        "every run, so choose another path"
    )


def clear_data_dir(data_dir: Path) -> None:
    """Start the demo's service state afresh (`check_data_dir` said it is the demo's)."""
    check_data_dir(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / DATA_DIR_MARKER).write_text("tms demo's service state: cleared on every run\n")
