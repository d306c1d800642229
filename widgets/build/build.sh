#!/bin/sh
# Rebuild widgets/graph.bundle.js from the pinned npm packages (package-lock.json).
set -e
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run build
