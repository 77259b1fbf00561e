#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs one 5-node chaos test of the bundled cluster with
# partitions, kills, pauses and clock skew. Prints the seed at the start and, at the end, the stored run
# and its report. Extra arguments go to `harness run` (e.g. --seed 42, --bug ack-before-commit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/harness run --db cluster --mode blazingmq --nodes 5 --workload register \
  --nemesis partition,kill,pause,clock --time-limit 60 --concurrency 10 "$@"
