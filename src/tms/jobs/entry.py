"""spark-submit runs a `.py` file, not a module: this file is `python -m tms.jobs`."""

import sys
from pathlib import Path

# Python put this file's folder first on sys.path; its module names (client, runner…) must
# not shadow top-level packages.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != _HERE]

from tms.jobs.__main__ import run_as_script  # noqa: E402

run_as_script()
