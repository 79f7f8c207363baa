#!/usr/bin/env bash
# `npm start`: install what is missing on a fresh clone (as `npm test` does), then run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
exec node_modules/.bin/tsx demo/start.ts "$@"
