#!/usr/bin/env bash
# run-tests.sh - install what is missing, then run the whole test suite (unit, CLI, integration).
#   ./run-tests.sh                 the whole suite (what .ci/run calls)
#   ./run-tests.sh --quick         unit and CLI tests only: nothing that boots QEMU or Xen
#                                  and no big synthetic case (markers integration, emulated
#                                  and slow deselected), for the edit loop
#   ./run-tests.sh [--quick] ARGS  ARGS go to pytest (e.g. -k NAME, a path, --durations=20)
set -euo pipefail
cd "$(dirname "$0")"
select=()
if [[ ${1:-} == --quick ]]; then
	shift
	select=(-m "not integration and not emulated and not slow")
fi
./setup.sh --install-only
exec .venv/bin/python -m pytest -q ${select[@]+"${select[@]}"} "$@"
