#!/usr/bin/env bash
# Fetches RabbitMQ for the RabbitMQ quorum-queue DB adapter (harness run --db rabbitmq), idempotently.
#
# The nodes have no route to a package mirror, so the controller fetches Debian's rabbitmq-server and the
# Erlang packages it runs on with its own apt configuration (apt-get download + dpkg-deb -x, run by
# `python -m adapters.rabbitmq`) and packs what the nodes need into
# ${CHAOS_HARNESS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/chaos-harness}/rabbitmq/rabbitmq.tar.gz; each run uploads
# it to the nodes. Does nothing when the cache already holds it; --force fetches again.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m adapters.rabbitmq "$@"
