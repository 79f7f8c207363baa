#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser tests: Debian's package (playwright-core drives it;
# no browser download). Idempotent: does nothing when a chromium is already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
