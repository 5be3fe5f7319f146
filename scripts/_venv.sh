# Sourced by scripts/test and scripts/up: make .venv if needed, install the
# package editable with the dev extras when pyproject.toml changed.  Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
pick_python() {
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 &&
           "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$py"; return 0
        fi
    done
    echo "boxmaker needs Python 3.11 or newer; none was found on PATH" >&2
    return 1
}
if [ ! -x "$VENV/bin/python" ]; then
    BASE_PY="$(pick_python)"
    echo "setting up $VENV with $BASE_PY" >&2
    "$BASE_PY" -m venv "$VENV"
fi
STAMP="$VENV/.boxmaker-installed"
WANT="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "installing boxmaker (editable, with dev extras) into .venv" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[dev]" >&2
    echo "$WANT" > "$STAMP"
fi
