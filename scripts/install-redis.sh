#!/usr/bin/env bash
# Fetches Redis for the Redis + Sentinel DB adapter (harness run --db redis), idempotently.
#
# The nodes have no route to a package mirror, so the controller fetches Debian's redis-server,
# redis-sentinel and redis-tools, and the libraries the node image lacks, with its own apt configuration
# (apt-get download + dpkg-deb -x, run by `python -m adapters.redis`) and packs what the nodes need into
# ${CHAOS_HARNESS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/chaos-harness}/redis/redis.tar.gz; each run uploads it
# to the nodes. Does nothing when the cache already holds it; --force fetches again.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m adapters.redis "$@"
