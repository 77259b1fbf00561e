#!/usr/bin/env bash
# Fetches etcd for the etcd DB adapter (harness run --db etcd), idempotently.
#
# The nodes have no route to a package mirror, so the controller fetches Debian's etcd-server with its
# own apt configuration (apt-get download + dpkg-deb -x, run by `python -m adapters.etcd`) and
# keeps its etcd binary in ${CHAOS_HARNESS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/chaos-harness}/etcd-server/;
# each run uploads it to the nodes. Does nothing when the cache already holds it; --force fetches again.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m adapters.etcd "$@"
