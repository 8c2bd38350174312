#!/usr/bin/env bash
# Lint, format check and the default test suite (what CI runs). Slow tests: CSAN_SLOW=1.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CSAN_DATA:-}" ] && [ -d ../shared/data ]; then
  export CSAN_DATA=$(cd ../shared/data && pwd)
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# one pytest-xdist worker a core (tests/conftest.py gives each its share of the threads);
# pass -n 0 to run in one process
.venv/bin/python -m pytest -q -n auto "$@"
