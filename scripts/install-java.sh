#!/usr/bin/env bash
# Installs a Java runtime for PySpark (the analysis pipeline) on Debian/Ubuntu, idempotently.
#
# - Does nothing when `java -version` already answers (any Java PySpark 4 accepts: 17 or newer).
# - Otherwise, as root on Debian/Ubuntu: `apt-get install openjdk-17-jre-headless` (no GUI libraries).
# - Anywhere else it says what to do and exits 1.
#
# PySpark finds `java` on PATH (or under $JAVA_HOME); nothing else needs configuring.
set -euo pipefail

log() { printf '[install-java] %s\n' "$*"; }
die() { printf '[install-java] error: %s\n' "$*" >&2; exit 1; }

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    printf '%s\n' "$JAVA_HOME/bin/java"
  else
    command -v java 2>/dev/null || true
  fi
}
java_answers() { local bin; bin=$(java_bin); [ -n "$bin" ] && "$bin" -version >/dev/null 2>&1; }
java_version() { "$(java_bin)" -version 2>&1 | head -n 1; }

if java_answers; then
  log "java already answers: $(java_version); nothing to do"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  die "no working 'java' on PATH and this script installs one only as root: run 'sudo $0', or install a Java 17 runtime yourself and put it on PATH (or set JAVA_HOME)"
fi

os_family=""
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  os_family=$(. /etc/os-release && printf '%s %s' "${ID:-}" "${ID_LIKE:-}")
fi
case " $os_family " in
  *" debian "* | *" ubuntu "*) ;;
  *) die "this script knows only Debian and Ubuntu (found '${os_family:-unknown}'): install a Java 17 runtime with your distribution's tools, then check that 'java -version' answers" ;;
esac

log "installing openjdk-17-jre-headless with apt-get"
# Slim images drop man pages; the JRE's post-install script fails without this directory.
mkdir -p /usr/share/man/man1
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends openjdk-17-jre-headless

java_answers || die "openjdk-17-jre-headless installed but 'java -version' still fails; check 'update-alternatives --display java'"
log "installed: $(java_version)"
