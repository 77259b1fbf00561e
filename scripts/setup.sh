#!/usr/bin/env bash
# Installs everything the harness and its tests need on a Debian/Ubuntu machine, idempotently:
# a virtual environment at .venv with the project and its test dependencies.
# Later steps (Docker engine, node image, Java, Chromium) are added here as the parts that need
# them land, so that a fresh machine needs nothing but this script.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating virtual environment .venv"
  "$PYTHON" -m venv .venv
fi
log "installing the project and its test dependencies"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
log "Docker engine and node image (container tests, docker platform)"
bash scripts/install-docker.sh
bash scripts/build-image.sh
log "etcd for the etcd DB adapter (fetched on this machine, uploaded to the nodes by each run)"
bash scripts/install-etcd.sh
log "nats-server for the NATS JetStream DB adapter (fetched on this machine, uploaded to the nodes by each run)"
bash scripts/install-nats.sh
log "Redis and Sentinel for the Redis DB adapter (fetched on this machine, uploaded to the nodes by each run)"
bash scripts/install-redis.sh
log "RabbitMQ and Erlang for the RabbitMQ DB adapter (fetched on this machine, uploaded to the nodes by each run)"
bash scripts/install-rabbitmq.sh
log "Java for Spark"
bash scripts/install-java.sh
log "Chromium (report tests in a real browser)"
bash scripts/install-chromium.sh
log "done"
