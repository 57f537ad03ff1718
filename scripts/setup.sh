# Shared by scripts/demo.sh and scripts/test.sh (sourced, not run): a Python of 3.11 or later
# and the project's virtual environment in .venv with what the caller installs into it.

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "tms needs Python 3.11 or later: none found (set PYTHON=/path/to/python3.11)" >&2
    return 1
}

# ensure_venv SPEC: .venv holding `pip install -e SPEC` (`.` for the service alone).
ensure_venv() {
    local python
    if [ ! -x .venv/bin/python ]; then
        python="$(find_python)"
        echo "setting up .venv with $python" >&2
        "$python" -m venv .venv
        .venv/bin/python -m pip install --quiet --upgrade pip
    fi
    .venv/bin/python -m pip install --quiet -e "$1"
}
