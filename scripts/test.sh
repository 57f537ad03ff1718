#!/usr/bin/env bash
# The tests, with their set-up: the `dev` extra in .venv; Debian's Chromium and its driver
# (the console's browser tests) and a JDK's `javac` (the tests compile a user's Java class
# against Hudi's bundle), installed with apt-get when missing, which needs root (sudo is used
# when present); Apache Hudi's Spark bundles fetched into the bundle cache. Then pytest over
# both cores (`TMS_TEST_WORKERS`, default 2; 0 runs in one process). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
ensure_venv '.[dev]'

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
if [ ${#missing[@]} -gt 0 ]; then
    as_root=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || {
            echo "the tests need Debian's ${missing[*]}: as root, apt-get install ${missing[*]}" >&2
            exit 1
        }
        as_root=(sudo)
    fi
    echo "installing ${missing[*]} with apt-get (as root)" >&2
    "${as_root[@]}" apt-get update -q
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

.venv/bin/python -m tests.hudi_java.support

workers="${TMS_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
    exec .venv/bin/pytest "$@"
fi
# the slowest tests are listed at the end: what to look at when the suite grows past 30 minutes
exec .venv/bin/pytest -n "$workers" --dist worksteal --durations=25 "$@"
