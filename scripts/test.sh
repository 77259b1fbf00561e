#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
#
# Without a selection of your own, the suite runs in two parts: the tests that need no container, Spark,
# browser or real processes (most of them, CPU-bound) spread over the cores by pytest-xdist
# (PYTEST_WORKERS, default: one per core), then those that do, one at a time (each loads the machine by
# itself, and some detect bugs whose timing a busy machine would change). Both parts always run; the
# exit status is the first failure's. With a selection (-m, -k, a path or a node id), one pytest run
# does exactly what was asked.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check .

SERIAL="docker or spark or browser or slow"
for arg in "$@"; do
  case "$arg" in
    -m|-k|-m*|-k*|--pyargs|[!-]*) exec .venv/bin/python -m pytest "$@" ;;
  esac
done

status=0
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-auto}" -m "not ($SERIAL)" "$@" || status=$?
[ "$status" -eq 5 ] && status=0  # (nothing selected)
second=0
.venv/bin/python -m pytest -m "$SERIAL" "$@" || second=$?
[ "$second" -eq 5 ] && second=0
[ "$status" -ne 0 ] && exit "$status"
exit "$second"
