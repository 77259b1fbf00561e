#!/usr/bin/env bash
# Installs (when missing) and starts the Docker engine on Debian/Ubuntu, idempotently.
#
# - Does nothing when an engine already answers `docker info`.
# - Otherwise, as root on Debian/Ubuntu: `apt-get install docker.io debootstrap` (debootstrap is what
#   scripts/build-image.sh uses to make a base image where no registry is reachable), then starts the
#   engine: through systemd where systemd runs, else `dockerd` in the background with its log in
#   $DOCKERD_LOG (default /var/log/dockerd.log), and waits for /var/run/docker.sock to answer.
# - Anywhere else it says what to do and exits 1.
#
# Environment: DOCKERD_LOG (log file of a background dockerd), DOCKER_WAIT_S (seconds to wait for the
# engine, default 60).
set -euo pipefail

log() { printf '[install-docker] %s\n' "$*"; }
die() { printf '[install-docker] error: %s\n' "$*" >&2; exit 1; }

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
DOCKER_WAIT_S=${DOCKER_WAIT_S:-60}

# A dockerd that was killed leaves /var/run/docker/containerd/containerd.pid behind. After a reboot
# that pid may belong to an unrelated process, and a new dockerd then logs "containerd is still
# running", waits for a socket nobody creates and gives up after its own timeout. Keep the file only
# while the process it names is a containerd.
clear_stale_containerd_pid() {
  local pidfile=/var/run/docker/containerd/containerd.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(tr -dc '0-9' <"$pidfile")
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = containerd ]; then
    return 0
  fi
  log "removing stale $pidfile (pid ${pid:-none} is not a running containerd)"
  rm -f "$pidfile"
}

# A dockerd that is running (a dying one, or a zombie nobody reaps, does not count).
dockerd_alive() { ps -C dockerd -o stat= 2>/dev/null | grep -q '^[^ZX]'; }

engine_answers() { command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; }

if engine_answers; then
  log "a Docker engine already answers 'docker info'; nothing to do"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  die "no Docker engine answers 'docker info' and this script installs one only as root: run 'sudo $0', or start your Docker engine yourself (and make its socket usable by $(id -un))"
fi

os_family=""
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  os_family=$(. /etc/os-release && printf '%s %s' "${ID:-}" "${ID_LIKE:-}")
fi
case " $os_family " in
  *" debian "* | *" ubuntu "*) ;;
  *) die "this script knows only Debian and Ubuntu (found '${os_family:-unknown}'): install and start a Docker engine with your distribution's tools (see https://docs.docker.com/engine/install/), then check that 'docker info' answers" ;;
esac

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  log "installing docker.io and debootstrap with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends docker.io debootstrap ca-certificates
fi
command -v dockerd >/dev/null 2>&1 || die "apt-get installed docker.io but there is no 'dockerd' on PATH ($PATH)"

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  log "starting the engine with systemd (systemctl start docker)"
  systemctl start docker || true
elif [ -S /var/run/docker.sock ] && dockerd_alive; then
  log "dockerd is already starting; waiting for it"
else
  log "starting dockerd in the background, log in $DOCKERD_LOG"
  rm -f /var/run/docker.sock /var/run/docker.pid
  clear_stale_containerd_pid
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
fi

deadline=$((SECONDS + DOCKER_WAIT_S))
until [ -S /var/run/docker.sock ] && engine_answers; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    if [ -f "$DOCKERD_LOG" ]; then
      printf '[install-docker] last lines of %s:\n' "$DOCKERD_LOG" >&2
      tail -n 20 "$DOCKERD_LOG" >&2
    fi
    die "the Docker engine did not answer 'docker info' within ${DOCKER_WAIT_S}s; see the log above"
  fi
  sleep 0.5
done
log "the Docker engine answers: $(docker info --format 'server {{.ServerVersion}}, storage {{.Driver}}' 2>/dev/null)"
