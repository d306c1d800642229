#!/usr/bin/env bash
# Installs the system packages the test suite needs (Debian): poppler-utils (pdftotext) for
# the report's PDF test, redis-server for
# the job store tests, chromium for the widget tests, npm (with Node) for the MCP
# Inspector test, which installs the Inspector from the npm registry, and postgresql
# (the server binaries) for the store conformance suite, which runs its own throwaway
# server with initdb/pg_ctl. Does nothing when present.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)  # the report's PDF text is checked
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing system packages: ${need[*]}. Install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "Installing system packages: ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
