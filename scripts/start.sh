#!/usr/bin/env bash
# `npm start`: install what is missing on a fresh clone (as `npm test` does), then run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
exec node_modules/.bin/tsx demo/start.ts "$@"
