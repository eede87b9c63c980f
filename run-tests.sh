#!/usr/bin/env bash
# run-tests.sh - install what is missing, then run the whole test suite (unit, CLI, integration).
#   ./run-tests.sh                 the whole suite (what .ci/run calls)
#   ./run-tests.sh --quick         unit and CLI tests only: nothing that boots QEMU or Xen
#                                  and no test of seconds (markers integration, emulated
#                                  and slow deselected: ~1,900 tests), for the edit loop
#   ./run-tests.sh [--quick] ARGS  ARGS go to pytest (e.g. -k NAME, a path, --durations=20)
# Three pytest-xdist workers (IRQLAB_TEST_WORKERS=N to change, 0 for none); tests that hold
# a host-wide resource share one worker (tests/conftest.py, _HOST_WIDE).
set -euo pipefail
cd "$(dirname "$0")"
select=()
if [[ ${1:-} == --quick ]]; then
	shift
	select=(-m "not integration and not emulated and not slow")
fi
./setup.sh --install-only
# Bytecode cached (__pycache__, ignored by git) even where the environment says not to
# (this machine sets PYTHONDONTWRITEBYTECODE=1): without it every pytest process rewrote
# and compiled all 178 test modules again (collection 11.4 s instead of 4.3 s) and every
# CLI child compiled the modules it imports.
unset PYTHONDONTWRITEBYTECODE
workers=${IRQLAB_TEST_WORKERS:-3}
parallel=()
if [[ $workers != 0 ]]; then
	parallel=(-n "$workers" --dist loadgroup)
fi
exec .venv/bin/python -m pytest -q ${parallel[@]+"${parallel[@]}"} ${select[@]+"${select[@]}"} "$@"
