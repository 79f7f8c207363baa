#!/usr/bin/env bash
# `npm start`: install what is missing on a fresh clone (as `npm test` does), then run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
# Two malloc arenas for the process that runs the workers: with glibc's default (8 per core) the
# SDK core's and the workflow threads' allocations kept growing the process outside its heaps
# (README.md, "Build, containers, worker processes").
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec node_modules/.bin/tsx demo/start.ts "$@"
