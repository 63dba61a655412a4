#!/usr/bin/env bash
# Re-applies the mechanical part of the lint rules (safe autofixes, then the formatter) to the whole tree, e.g. after
# a merge. What ruff cannot fix by itself is left for `make lint` to report.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
"$PY" -m ruff check --fix --exit-zero .
"$PY" -m ruff format .
"$PY" -m ruff check .
