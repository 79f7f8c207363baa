#!/usr/bin/env bash
# `npm test`: install what is missing, start (or reuse) the services, migrate, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
npx tsx scripts/services.ts up --test
npx tsx scripts/migrate.ts
# The dashboard's browser tests drive Debian's chromium (installed here when missing).
bash scripts/ensure-chromium.sh
# The static checks side by side: each keeps about one core busy, one after the other they left
# the second core idle for a minute.
checks=()
npx tsc -p . &
checks+=($!)
{ npx tsc -p src/dashboard/public && npx prettier --check .; } &
checks+=($!)
npx eslint --max-warnings 0 src test testkit scripts bench demo devstack &
checks+=($!)
failed=0
for pid in "${checks[@]}"; do wait "$pid" || failed=1; done
if [ "$failed" -ne 0 ]; then
  echo 'npm test: a type check, the formatting or the lint failed (see above)' >&2
  exit 1
fi
# Every test file in one pool, two at a time (the services are shared and each test isolates
# itself by namespace; no assertion depends on a process getting the CPU in time). The longest
# files start first, so the pool does not end on one of them while the other slot idles. The
# batched run shape (CARD_RUN_SHAPE=batch) goes through the whole-system tests that apply to both
# shapes in test/orchestration/batched/.
longest=(
  test/faults/serviceOutage.test.ts
  test/faults/npmStart.test.ts
  test/deploy/built.test.ts
  test/orchestration/crash.test.ts
  test/orchestration/batchShape.test.ts
  test/gateway/limiter.test.ts
  test/orchestration/executionShape.test.ts
  test/deploy/versioning.test.ts
  test/orchestration/steady.test.ts
)
mapfile -t rest < <(find test -name '*.test.ts' -not -path 'test/faults-suite/*' -not -path 'test/cluster/*' | sort | grep -v -x -F "${longest[@]/#/-e}")
# Where the minutes go: each file's time, the slowest first, in test-results/test-file-times.txt
# (a reporter beside the usual one; JavaScript, since the runner loads reporters before tsx's loader).
mkdir -p test-results
times_reporter=$(mktemp --suffix=.mjs)
trap 'rm -f "$times_reporter"' EXIT
cat >"$times_reporter" <<'EOF'
export default async function* fileTimes(source) {
  const began = Date.now();
  const files = new Map();
  for await (const { type, data } of source) {
    // A file's own entry: named by its path, at the top level; its duration is its process' run.
    if (type === 'test:complete' && data?.nesting === 0 && data.file !== undefined && data.name === data.file) files.set(data.file, data.details?.duration_ms ?? 0);
  }
  const rows = [...files].sort((a, b) => b[1] - a[1]);
  const sum = rows.reduce((total, [, ms]) => total + ms, 0);
  yield `${rows.length} test files in ${((Date.now() - began) / 1000).toFixed(0)} s (the files' times add up to ${(sum / 1000).toFixed(0)} s)\n`;
  for (const [file, ms] of rows) yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${file.replace(`${process.cwd()}/`, '')}\n`;
}
EOF
# The runner's own default reporter on stdout: spec on a terminal, TAP otherwise.
reporter=tap
if [ -t 1 ]; then reporter=spec; fi
status=0
node --import tsx --test --test-concurrency=2 --test-reporter="$reporter" --test-reporter-destination=stdout \
  --test-reporter="$times_reporter" --test-reporter-destination=test-results/test-file-times.txt "${@}" "${longest[@]}" "${rest[@]}" || status=$?
head -n 16 test-results/test-file-times.txt
exit "$status"
