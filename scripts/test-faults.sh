#!/usr/bin/env bash
# `npm run test:faults`: the fault-injection suite — a running system that loses its services.
# - test/faults-suite/faults.test.ts starts its own private PostgreSQL, Redis and Temporal dev
#   server (ports 15433, 16379, 17233) and stops them at the end (~6.5 minutes, most of it a
#   3-minute PostgreSQL outage);
# - test/faults-suite/ingestOutage.test.ts a PostgreSQL of its own (port 15533) beside the shared
#   Temporal and Redis;
# - test/faults/serviceOutage.test.ts (PostgreSQL, then Redis, stopped for 10 s: every process
#   survives) its own PostgreSQL and Redis (15435, 16381), and test/faults/npmStart.test.ts (the
#   demo as `npm start` runs it, PostgreSQL stopped under it) its own PostgreSQL (15434);
# - test/faults-suite/recordFaults.test.ts (1 % of record writes failing for 5 minutes, four
#   systems side by side on the shared services, ~7.5 minutes): started second, beside the long one.
# Each stops and kills only its own services and processes, so the files run side by side, three
# at a time: the two long ones first, one slot each, the others one after the other in the third;
# the suite takes about as long as its longest file (most of both long ones is waiting).
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
# TypeScript through Node's own type transform, not tsx (scripts/ts-node-options.sh).
source scripts/ts-node-options.sh
files=(
  test/faults-suite/faults.test.ts
  test/faults-suite/recordFaults.test.ts
  test/faults-suite/ingestOutage.test.ts
  test/faults/serviceOutage.test.ts
  test/faults/npmStart.test.ts
)
# Every fault test file is listed above: a new one must be placed (and counted) here.
mapfile -t found < <(find test/faults-suite test/faults -name '*.test.ts' | sort)
if [ "$(printf '%s\n' "${found[@]}" | sort)" != "$(printf '%s\n' "${files[@]}" | sort)" ]; then
  echo "test:faults: the fault test files found (${found[*]}) are not the ones listed in scripts/test-faults.sh" >&2
  exit 1
fi
# A test still running after 15 minutes fails and its file's process ends (the longest outage is 3 minutes).
node "${TS_NODE_OPTIONS[@]}" testkit/runFiles.ts --concurrency 3 --file-timeout 900 --failures test-results/faults-failures.txt "${@}" -- "${files[@]}" || status=$?
# Last, so a log read from its end says why a test failed, not only which.
cat test-results/faults-failures.txt
exit "${status:-0}"
