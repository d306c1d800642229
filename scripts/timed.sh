#!/usr/bin/env bash
# Runs one stage of `make test` and prints how long it took, so slow stages show:
#   scripts/timed.sh NAME COMMAND [ARGS…]
# The command's exit code is kept; a summary of every stage is appended to
# $TAHRIX_STAGE_LOG (the Makefile prints it at the end).
set -uo pipefail
name=$1; shift
start=$(date +%s.%N)
"$@"; rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
status=$([ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)")
printf '== stage %-16s %7s s  %s\n' "$name" "$secs" "$status"
[ -n "${TAHRIX_STAGE_LOG:-}" ] && printf '%-16s %7s s  %s\n' "$name" "$secs" "$status" >> "$TAHRIX_STAGE_LOG"
exit "$rc"
