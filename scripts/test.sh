#!/usr/bin/env bash
# `npm test`: install what is missing, start (or reuse) the services, migrate, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ] || [ ! -x node_modules/.bin/knip ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
npx tsc -p .
npx tsc -p src/dashboard/public
# The dashboard's browser tests drive Debian's chromium (installed here when missing).
bash scripts/ensure-chromium.sh
npx prettier --check .
npx eslint --max-warnings 0 src test testkit scripts bench demo devstack
# Unused files, exports and dependencies (knip.json).
npx knip
# Files whose assertions depend on processes getting the CPU when they need it (the limiter's
# utilisation across four caller processes, a scheduler continuing-as-new under a stream of
# updates) run first, alone; the rest two at a time (the services are shared and each test
# isolates itself by namespace).
solo=(test/gateway/limiter.test.ts test/orchestration/continueAsNew.test.ts)
mapfile -t files < <(find test -name '*.test.ts' -not -path 'test/faults-suite/*' -not -path 'test/cluster/*' | sort | grep -v -x -F "${solo[@]/#/-e}")
node --import tsx --test --test-concurrency=1 "${@}" "${solo[@]}"
node --import tsx --test --test-concurrency=2 "${@}" "${files[@]}"
# The batched run shape (CARD_RUN_SHAPE=batch) through the whole-system tests that apply to both
# shapes: a card worker killed mid-execution, request-checks, a mode switch, failures and retries.
# (The shape's own tests, test/orchestration/batchShape.test.ts and cardBatch.test.ts, ran above.)
batch=(test/orchestration/crash.test.ts test/orchestration/requestCheck.test.ts test/orchestration/mode.test.ts test/orchestration/failures.test.ts)
CARD_RUN_SHAPE=batch exec node --import tsx --test --test-concurrency=2 "${@}" "${batch[@]}"
