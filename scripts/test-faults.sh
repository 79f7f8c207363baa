#!/usr/bin/env bash
# `npm run test:faults`: the fault-injection suite. It starts its own private
# PostgreSQL, Redis and Temporal dev server (ports 15433, 16379, 17233) and stops them at the end;
# the shared services are only needed for the migrations tooling. Files run one at a time: each
# kills and restarts services under a running system.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
mapfile -t files < <(find test/faults-suite -name '*.test.ts' | sort)
exec node --import tsx --test --test-concurrency=1 "${@}" "${files[@]}"
