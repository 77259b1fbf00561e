#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests of the HTML reports (`pytest -m browser`), idempotently:
# nothing happens when /usr/bin/chromium already exists. Headless only; no driver, no downloaded browser
# (tools that fetch their own browser fail on these machines: see ENVIRONMENT.md, "Browsers").
set -euo pipefail

log() { printf '[install-chromium] %s\n' "$*"; }

if [ -x /usr/bin/chromium ]; then
  log "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown')"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    log "not root and no sudo: install chromium yourself (apt-get install -y chromium)" >&2
    exit 1
  fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
  log "no apt-get here: install Chromium so that /usr/bin/chromium exists, then re-run the tests" >&2
  exit 1
fi

log "apt-get install chromium"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# fonts-dejavu-core gives headless screenshots readable glyphs on a minimal image.
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core fonts-liberation
if [ ! -x /usr/bin/chromium ]; then
  log "apt-get finished but /usr/bin/chromium is missing" >&2
  exit 1
fi
log "installed: $(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown')"
