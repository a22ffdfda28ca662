#!/usr/bin/env bash
# Install the Debian packages the tests need (redis-server, chromium, ip + unshare for Ray) if absent.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# apt's own output is hidden (-qq, >/dev/null): say what is coming and how long
# it took, so a silent minute does not look like a hang.
echo "==> installing system packages: ${missing[*]} (apt-get, output hidden; 1-3 minutes the first time)"
start=$(date +%s)
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
echo "==> system packages installed in $(( $(date +%s) - start )) s"
