#!/usr/bin/env bash
# `npm test`: install what is missing, start (or reuse) the services, migrate, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ] || [ ! -x node_modules/.bin/knip ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
mkdir -p test-results
# The dashboard's browser tests drive Debian's chromium (installed here when missing).
bash scripts/ensure-chromium.sh
# The static checks side by side: each keeps about one core busy, one after the other they left
# the second core idle for a minute. (Beside the test pool they saved nothing: the pool keeps both
# cores busy, so they only made it slower by as much.)
checks=()
npx tsc -p . &
checks+=($!)
{ npx tsc -p src/dashboard/public && npx prettier --check . --log-level warn; } &
checks+=($!)
npx eslint --max-warnings 0 src test testkit scripts bench demo devstack &
checks+=($!)
# Unused files, exports and dependencies (knip.json).
npx knip &
checks+=($!)
failed=0
for pid in "${checks[@]}"; do wait "$pid" || failed=1; done
if [ "$failed" -ne 0 ]; then
  echo 'npm test: a type check, the formatting or the lint failed (see above)' >&2
  exit 1
fi
# Every test file in one pool, three at a time (the services are shared and each test isolates
# itself by namespace; no assertion depends on a process getting the CPU in time). Much of a
# whole-system test is waiting (for ticks, intervals, backoffs, outages): on this 2-core machine a
# sample of 18 files took 107 s two at a time, 82 s three at a time, 101 s four at a time. The
# longest files start first, so the pool does not end on one of them while the other slots idle
# (testkit/runFiles.ts: `node --test` would sort them by path); each file's time, the slowest
# first, goes to test-results/test-file-times.txt. The batched run shape (CARD_RUN_SHAPE=batch)
# goes through the whole-system tests that apply to both shapes in test/orchestration/batched/.
# (The longest in the clean-clone runs of 2026-12-02: 25-54 s each.)
longest=(
  test/gateway/limiter.test.ts
  test/dashboard/browser.test.ts
  test/orchestration/crash.test.ts
  test/orchestration/steady.test.ts
  test/orchestration/finishOutage.test.ts
  test/ingest/async.test.ts
  test/deploy/built.test.ts
  test/orchestration/batched/crash.test.ts
  test/orchestration/batched/failures.test.ts
  test/orchestration/failures.test.ts
  test/workflows/cardCheck.test.ts
)
# Not here: the fault-injection suite (test/faults-suite, test/faults: `npm run test:faults`) and
# the cluster suite (test/cluster: `npm run test:cluster`); .ci/run runs both after this.
mapfile -t rest < <(find test -name '*.test.ts' -not -path 'test/faults-suite/*' -not -path 'test/faults/*' -not -path 'test/cluster/*' | sort | grep -v -x -F "${longest[@]/#/-e}")
node --import tsx testkit/runFiles.ts --concurrency 3 --times test-results/test-file-times.txt --failures test-results/test-failures.txt "${@}" -- "${longest[@]}" "${rest[@]}" || status=$?
head -n 16 test-results/test-file-times.txt
# Last, so a log read from its end says why a test failed, not only which.
cat test-results/test-failures.txt
echo "npm test: ${SECONDS} s in all (install check, services, static checks, test pool)"
exit "${status:-0}"
