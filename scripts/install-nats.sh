#!/usr/bin/env bash
# Fetches nats-server for the NATS JetStream DB adapter (harness run --db nats), idempotently.
#
# The nodes have no route to a package mirror, so the controller fetches Debian's nats-server with its
# own apt configuration (apt-get download + dpkg-deb -x, run by `python -m adapters.nats`) and keeps
# its binary in ${CHAOS_HARNESS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/chaos-harness}/nats-server/; each run
# uploads it to the nodes. Does nothing when the cache already holds it; --force fetches again.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m adapters.nats "$@"
