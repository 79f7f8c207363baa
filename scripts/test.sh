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
# The static checks (types, formatting, lint, unused exports) run beside the test pool at the
# lowest CPU priority: the pool leaves about a quarter of the two cores idle while its whole-system
# tests wait (for ticks, intervals, outages), and the checks (~70 s of CPU) fill that time instead
# of adding ~35 s before the pool. At normal priority beside it they slowed the pool by as much as
# they saved (323 → 357 s). Their logs go to test-results/check-*.log; their verdict comes last.
checks=()
nice -n 19 npx tsc -p . > test-results/check-tsc.log 2>&1 &
checks+=($!)
{ nice -n 19 npx tsc -p src/dashboard/public && nice -n 19 npx prettier --check . --log-level warn; } > test-results/check-dashboard-prettier.log 2>&1 &
checks+=($!)
nice -n 19 npx eslint --max-warnings 0 src test testkit scripts bench demo devstack > test-results/check-eslint.log 2>&1 &
checks+=($!)
# Unused files, exports and dependencies (knip.json).
nice -n 19 npx knip > test-results/check-knip.log 2>&1 &
checks+=($!)
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
# TypeScript through Node's own type transform, not tsx (scripts/ts-node-options.sh).
source scripts/ts-node-options.sh
# A test still running after 5 minutes fails and its file's process ends (the longest file took 91 s
# beside two busy loops): a hung cleanup then costs minutes, not the rest of CI's 90.
node "${TS_NODE_OPTIONS[@]}" testkit/runFiles.ts --concurrency 3 --file-timeout 300 --times test-results/test-file-times.txt --failures test-results/test-failures.txt "${@}" -- "${longest[@]}" "${rest[@]}" || status=$?
head -n 16 test-results/test-file-times.txt
# Last, so a log read from its end says why a test failed, not only which.
cat test-results/test-failures.txt
checks_failed=0
for pid in "${checks[@]}"; do wait "$pid" || checks_failed=1; done
if [ "$checks_failed" -ne 0 ]; then
  cat test-results/check-*.log >&2
  echo 'npm test: a type check, the formatting, the lint or the unused-export check failed (see above)' >&2
  status=1
fi
echo "npm test: ${SECONDS} s in all (install check, services, static checks beside the test pool)"
exit "${status:-0}"
