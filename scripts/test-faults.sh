#!/usr/bin/env bash
# `npm run test:faults`: the fault-injection suite. test/faults-suite/faults.test.ts starts its own
# private PostgreSQL, Redis and Temporal dev server (ports 15433, 16379, 17233) and stops them at
# the end; ingestOutage.test.ts a PostgreSQL of its own (port 15533, its own data folder) beside the
# shared Temporal and Redis. Each stops and kills only its own services and processes, so the two
# files run side by side: the suite takes as long as its longest file, not the sum.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
mapfile -t files < <(find test/faults-suite -name '*.test.ts' | sort)
exec node --import tsx --test --test-concurrency=2 "${@}" "${files[@]}"
