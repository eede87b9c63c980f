#!/usr/bin/env bash
# run-tests.sh - install what is missing, then run the whole test suite (unit, CLI, integration).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --install-only
exec .venv/bin/python -m pytest -q "$@"
