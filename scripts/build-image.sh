#!/usr/bin/env bash
# Builds the node image (docker/node.Dockerfile), by default tagged chaos-node:latest.
#
# The base is $BASE_IMAGE (debian:bookworm-slim) when it is present or can be pulled. Where no registry
# is reachable (see ../shared/design/ENVIRONMENT.md), a base is bootstrapped from Debian's packages with
# debootstrap into build/node-base/ (ignored by git), imported as $LOCAL_BASE, and the Dockerfile builds
# FROM it. The bootstrap is skipped when $LOCAL_BASE already exists (delete that image to redo it).
#
# After the build, a container of the image (with NET_ADMIN) must be able to add and remove an iptables
# rule with the conntrack match (one-way partitions); if Debian's default iptables backend does not work on this kernel, the image is rebuilt with the
# other one (legacy / nft).
#
# Usage: scripts/build-image.sh [--tag IMAGE]
# Environment: IMAGE (chaos-node:latest), BASE_IMAGE (debian:bookworm-slim),
#   LOCAL_BASE (chaos-node-base:bookworm), DEBIAN_MIRROR (http://deb.debian.org/debian),
#   IPTABLES_BACKEND (nft; the one tried first), PULL_TIMEOUT_S (120).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[build-image] %s\n' "$*"; }
die() { printf '[build-image] error: %s\n' "$*" >&2; exit 1; }

IMAGE=${IMAGE:-chaos-node:latest}
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
LOCAL_BASE=${LOCAL_BASE:-chaos-node-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
IPTABLES_BACKEND=${IPTABLES_BACKEND:-nft}
PULL_TIMEOUT_S=${PULL_TIMEOUT_S:-120}
BOOTSTRAP_DIR=build/node-base/rootfs
PACKAGES=python3,iptables,iproute2,procps,openssh-server

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ $# -ge 2 ] || die "--tag needs an image name, e.g. --tag chaos-node:dev"; IMAGE=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'; usage: scripts/build-image.sh [--tag IMAGE]" ;;
  esac
done
case "$IPTABLES_BACKEND" in legacy | nft) ;; *) die "IPTABLES_BACKEND must be 'legacy' or 'nft', not '$IPTABLES_BACKEND'" ;; esac

timeout 20 docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info': run scripts/install-docker.sh (as root) first"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

bootstrap_base() {
  if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing debootstrap with apt-get"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap \
        || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap; }
    else
      die "the base image $BASE_IMAGE cannot be pulled and debootstrap is missing: install debootstrap (apt-get install debootstrap, as root) or make $BASE_IMAGE available, then rerun"
    fi
  fi
  [ "$(id -u)" -eq 0 ] || die "bootstrapping a base image with debootstrap needs root: rerun as root, or make $BASE_IMAGE available"
  log "bootstrapping a Debian bookworm base into $BOOTSTRAP_DIR from $DEBIAN_MIRROR (debootstrap minbase)"
  rm -rf "$BOOTSTRAP_DIR"
  mkdir -p "$BOOTSTRAP_DIR"
  local started=$SECONDS
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$BOOTSTRAP_DIR" "$DEBIAN_MIRROR" \
    >build/node-base/debootstrap.log 2>&1 \
    || { tail -n 20 build/node-base/debootstrap.log >&2; die "debootstrap failed (log: build/node-base/debootstrap.log); check that $DEBIAN_MIRROR is reachable"; }
  rm -rf "$BOOTSTRAP_DIR"/var/cache/apt/archives/*.deb "$BOOTSTRAP_DIR"/var/lib/apt/lists/*
  log "debootstrap took $((SECONDS - started))s; importing it as $LOCAL_BASE"
  tar -C "$BOOTSTRAP_DIR" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - "$LOCAL_BASE" >/dev/null
  rm -rf "$BOOTSTRAP_DIR"
}

if image_exists "$BASE_IMAGE"; then
  base=$BASE_IMAGE
  log "base $BASE_IMAGE is present"
elif timeout "$PULL_TIMEOUT_S" docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
  base=$BASE_IMAGE
  log "pulled base $BASE_IMAGE"
elif image_exists "$LOCAL_BASE"; then
  base=$LOCAL_BASE
  log "$BASE_IMAGE cannot be pulled; using the bootstrapped base $LOCAL_BASE already built"
else
  log "$BASE_IMAGE cannot be pulled (no registry reachable?); bootstrapping a base from Debian's packages"
  bootstrap_base
  base=$LOCAL_BASE
fi

build() {
  log "building $IMAGE FROM $base (iptables backend: $1)"
  docker build --quiet \
    --build-arg "BASE_IMAGE=$base" --build-arg "IPTABLES_BACKEND=$1" \
    -t "$IMAGE" -f docker/node.Dockerfile docker >/dev/null
}

# A node must be able to install and remove the rule a one-way partition uses, a DROP by conntrack
# direction (nemesis/shell.py, partition_commands; needs the kernel's xt_conntrack); 203.0.113.1 is TEST-NET-3.
iptables_works() {
  docker run --rm --network none --cap-add NET_ADMIN --entrypoint /bin/sh "$IMAGE" -c \
    'rule="INPUT -s 203.0.113.1 -m conntrack --ctdir ORIGINAL -j DROP"; iptables -A $rule && iptables -D $rule' \
    >/dev/null 2>&1
}

previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
build "$IPTABLES_BACKEND"
if ! iptables_works; then
  other=legacy
  [ "$IPTABLES_BACKEND" = legacy ] && other=nft
  log "iptables-$IPTABLES_BACKEND does not work in a container on this kernel; trying iptables-$other"
  build "$other"
  iptables_works || die "neither iptables-nft nor iptables-legacy can add a rule in a container on this kernel (kernel $(uname -r)); partitions need one of them, with the conntrack match (xt_conntrack)"
fi
current=$(docker image inspect -f '{{.Id}}' "$IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true  # the image this build replaced, unless still in use
fi
log "built $IMAGE (${current:7:12})"
