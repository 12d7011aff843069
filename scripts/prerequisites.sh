#!/usr/bin/env bash
# The system packages the test suite needs, installed with apt-get (Debian, Ubuntu) when missing:
#   redis-server  integration tests start their own Redis on a free port
#   nginx         the compose topology test and the two-node benchmark run behind a real nginx
#   prometheus    the alert rules and the dashboard queries are loaded into a real Prometheus
#   chromium      the admin console is checked in a real headless browser
# Usage (as root, or with sudo):  scripts/prerequisites.sh
# Node.js 20 is the other prerequisite (https://nodejs.org, or your distribution's nodejs package).
# Output is left visible on purpose: no test installs anything by itself.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

missing=()
for package in redis-server nginx prometheus chromium; do
  if have "$package"; then echo "prerequisites: $package found"; else missing+=("$package"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "prerequisites: nothing to install"
  exit 0
fi
echo "prerequisites: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "prerequisites: not root; run: sudo $0" >&2
  exit 1
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
