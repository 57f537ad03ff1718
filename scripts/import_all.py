"""Import every module of `tms` in this interpreter and exit 1 naming each that fails.

`python scripts/import_all.py` in a user's install (`pip install tms`, no extras) proves that
the runtime dependencies are enough; `--block NAME,...` makes those top-level packages
unimportable first, so the test suite, whose environment has more, can prove the same.
Modules that run a command when imported (`__main__`, spark-submit's `tms.jobs.entry`) are
left out: nothing imports them but their command.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import pkgutil
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

SCRIPTS = frozenset({"tms.jobs.entry"})


class Block(importlib.abc.MetaPathFinder):
    """Refuses the top-level packages named, as an environment without them would."""

    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not a runtime dependency)")
        return None


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--block", default="", help="top-level packages to refuse, comma-separated")
    args = parser.parse_args(argv)
    blocked = {name for name in args.block.split(",") if name}
    if blocked:
        sys.meta_path.insert(0, Block(blocked))
    import tms

    failed, imported = [], 0
    for module in pkgutil.walk_packages(tms.__path__, "tms."):
        if module.name.endswith(".__main__") or module.name in SCRIPTS:
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed.append(f"{module.name}: {type(exc).__name__}: {exc}")
        else:
            imported += 1
    for line in failed:
        print(line, file=sys.stderr)
    print(f"{imported} modules imported, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
