/**
 * The build as production runs it: `scripts/build.ts` compiles into a fresh folder, every entry
 * the container files name is there, and the compiled worker entry (plain `node`, prebuilt
 * workflow bundle) runs a stack's cards, writes JSON logs with each activity's card, account,
 * token and workflow id, and serves `/metrics` (our counters and the SDK's), `/livez` and `/readyz`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createStack, stackEnv } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { appServices, dockerfileCmd, nodeEntry, readCompose, readDockerfile } from './entries.js';
import { buildInto, runEntry, type EntryProcess } from './build.js';
import { claimLoopTaskQueue } from '../../src/workflow-safe/claimLoop.js';

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

function logLines(entry: EntryProcess): LogLine[] {
  return entry
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as LogLine;
      } catch {
        throw new Error(`not a JSON log line: ${line}`);
      }
    });
}

async function stop(entry: EntryProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (entry.child.exitCode === null && entry.child.signalCode === null) entry.child.kill('SIGTERM');
  return entry.exited;
}

test('deploy: the built entries exist and the compiled worker runs cards with JSON logs, /metrics, /livez and /readyz', async (t) => {
  const build = buildInto('deploy');
  t.after(() => build.remove());
  const compose = readCompose();
  const entries = [
    ...appServices(compose).map(([, service]) => nodeEntry(service.command)),
    nodeEntry(dockerfileCmd(readDockerfile())),
    'dist/src/cli/main.js',
  ];
  for (const entry of entries) assert.ok(existsSync(build.resolve(entry)), `${entry} is in the build output`);
  for (const asset of ['dist/workflow-bundle.js', 'dist/lua/claim.lua', 'dist/migrations'])
    assert.ok(existsSync(build.resolve(asset)), `${asset} is in the build output`);

  const stack = await createStack('deploy-built');
  let worker: EntryProcess | undefined;
  try {
    const env = { ...stackEnv(stack), LOG_LEVEL: 'debug', WORKER_METRICS_PORT: '0' };
    // The compiled migrate entry finds migrations/ beside it: the stack's schema is already current.
    const migrate = runEntry(build.resolve('dist/scripts/migrate.js'), env);
    assert.deepEqual(await migrate.exited, { code: 0, signal: null }, migrate.output());
    assert.match(migrate.output(), /nothing to apply/);

    const account = await seedAccount(stack, {
      name: 'dep1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 4,
      intervalsSec: { card_status: 3 },
    });
    const running = runEntry(build.resolve('dist/src/workers/all.js'), env);
    worker = running;
    const ready = await waitFor(
      'the compiled workers to report ready',
      async () => {
        if (running.child.exitCode !== null) throw new Error(`workers exited early:\n${running.output().slice(-3000)}`);
        return logLines(running).find((line) => line.msg.startsWith('workers running'));
      },
      60_000,
      100,
    );
    const metricsUrl = String(ready.metrics);
    assert.match(metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);

    await waitFor(
      'an execution of every card',
      async () => {
        const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution');
        return Number(rows[0]?.n) === account.cards.length || undefined;
      },
      60_000,
    );

    // The execution row lands before the run's last workflow task completes: wait for the SDK's
    // completion counter rather than reading the endpoint once.
    const metrics = await waitFor(
      'the SDK completion counter on /metrics',
      async () => {
        const text = await (await fetch(metricsUrl)).text();
        return /^temporal_workflow_completed\{[^}]*workflow_type="cardCheck"/m.test(text) ? text : undefined;
      },
      30_000,
    ).catch(async () => (await fetch(metricsUrl)).text());
    const checks = /^cardpoller_checks_total\{[^}]*outcome="success"[^}]*\} (\d+)/m.exec(metrics);
    assert.ok(checks && Number(checks[1]) >= 1, `our check counter is served:\n${metrics.slice(0, 2000)}`);
    assert.match(metrics, /^cardpoller_gateway_latency_seconds_count\{/m, 'gateway latency is served');
    assert.match(metrics, /^temporal_workflow_completed\{[^}]*workflow_type="cardCheck"/m, 'the SDK metrics are served on the same endpoint');
    assert.match(metrics, /^temporal_num_pollers\{/m);

    assert.equal(ready.live, metricsUrl.replace(/\/metrics$/, '/livez'));
    // The worker inherits this process's SCHEDULER_LOOP: with `activity` the control process also
    // runs the claim loops' worker on a queue of its own (docs/design.md, 'The claim loop as an activity').
    const served = Object.values(stack.taskQueues);
    if (stack.config.SCHEDULER_LOOP === 'activity') served.push(claimLoopTaskQueue(stack.taskQueues.control));
    for (const url of [String(ready.live), String(ready.ready)]) {
      const health = await fetch(url);
      const report = (await health.json()) as { status: string; workers: { taskQueue: string; state: string }[] };
      assert.deepEqual([health.status, report.status], [200, 'ok'], `${url}: ${JSON.stringify(report)}`);
      assert.deepEqual(report.workers.map((w) => w.taskQueue).sort(), served.sort());
    }

    // Every line is JSON; the lines of a card's activities carry its card, account, token and run.
    // A run's execution row can land before its process has written the activity's log line.
    const finishedLines = (): LogLine[] => logLines(running).filter((line) => line.msg === 'Activity completed' && line.activityType === 'finishExecution');
    await waitFor('finishExecution logged per card', async () => finishedLines().length >= account.cards.length, 15_000).catch(() => undefined);
    const lines = logLines(running);
    const finished = finishedLines();
    assert.ok(finished.length >= account.cards.length, `finishExecution logged per card (${finished.length})`);
    const cardIds = new Set(account.cards.map((card) => String(card.id)));
    for (const line of finished) {
      assert.ok(cardIds.has(String(line.cardId)), `cardId bound: ${JSON.stringify(line)}`);
      assert.equal(line.carrierId, String(account.carrier.id));
      assert.equal(typeof line.token, 'string');
      assert.equal(line.workflowId, `${stack.config.WORKFLOW_ID_PREFIX}card-${String(line.cardId)}`);
    }
    assert.ok(
      lines.some((line) => line.sdkComponent === 'core'),
      'core (Rust) logs are forwarded into the same stream',
    );

    const exit = await stop(running);
    assert.deepEqual(exit, { code: 0, signal: null }, running.output().slice(-2000));
    assert.ok(logLines(running).some((line) => line.msg === 'workers stopping'));
  } finally {
    if (worker) await stop(worker);
    await stack.close();
  }
});
