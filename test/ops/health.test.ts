/**
 * The health contract (src/runtime/health.ts) of the real entry points on real dependencies: a
 * worker process (src/workers/gateway.ts, its metrics server) and the API (src/api/main.ts). Each
 * reaches PostgreSQL, Redis and Temporal through a TCP relay of its own (testkit/relay.ts), which
 * the test cuts and restores one at a time: `/readyz` (and its alias `/healthz`) answers 503 naming
 * the cut dependency while `/livez` stays 200, and 200 again once the dependency is back. Every
 * line the process wrote meanwhile (start, connection errors, recoveries) is a JSON log line.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { cuttableRelay, type CuttableRelay } from '../../testkit/relay.js';
import { waitFor } from '../../testkit/seed.js';
import { uniqueName } from '../../testkit/temporal.js';
import { freePort, isRunning, spawnEntryProcess, type EntryProcess } from '../faults/entryProcess.js';

const DEPENDENCIES = ['postgres', 'redis', 'temporal'] as const;
type Dependency = (typeof DEPENDENCIES)[number];

/** Reconnects back off (Redis ≤ 2 s, Temporal's gRPC channel more): generous for a loaded machine. */
const SETTLE_MS = 45_000;

interface Answer {
  readonly status: number;
  readonly body: { readonly status?: string; readonly failed?: readonly string[] };
}

/** The three dependencies, each behind a relay; the environment that points a process at them. */
async function relayedDependencies(t: TestContext): Promise<{ relays: Record<Dependency, CuttableRelay>; env: Record<string, string> }> {
  const config = loadConfig();
  const database = new URL(config.DATABASE_URL);
  const redis = new URL(config.REDIS_URL);
  const [temporalHost, temporalPort] = config.TEMPORAL_ADDRESS.split(':');
  const relays: Record<Dependency, CuttableRelay> = {
    postgres: await cuttableRelay({ host: database.hostname, port: Number(database.port || 5432) }),
    redis: await cuttableRelay({ host: redis.hostname, port: Number(redis.port || 6379) }),
    temporal: await cuttableRelay({ host: temporalHost ?? '127.0.0.1', port: Number(temporalPort ?? 7233) }),
  };
  t.after(() => Promise.all(Object.values(relays).map((relay) => relay.close())));
  database.port = String(relays.postgres.port);
  redis.port = String(relays.redis.port);
  const prefix = uniqueName('health');
  return {
    relays,
    env: {
      DATABASE_URL: database.toString(),
      REDIS_URL: redis.toString(),
      REDIS_KEY_PREFIX: `${prefix}:`,
      TEMPORAL_ADDRESS: `127.0.0.1:${relays.temporal.port}`,
      // Queues of their own: a worker here takes no task of another test.
      TASK_QUEUE_CONTROL: `${prefix}-control`,
      TASK_QUEUE_CARD: `${prefix}-card`,
      TASK_QUEUE_CARD_PRIORITY: `${prefix}-card-priority`,
      TASK_QUEUE_GATEWAY: `${prefix}-gateway`,
      TASK_QUEUE_INGEST: `${prefix}-ingest`,
      WORKFLOW_ID_PREFIX: `${prefix}-`,
      LOG_LEVEL: 'warn',
    },
  };
}

function spawn(t: TestContext, name: string, script: string, env: Record<string, string>): EntryProcess {
  const entry = spawnEntryProcess(name, script, { ...process.env, ...env });
  t.after(async () => {
    if (!isRunning(entry)) return;
    entry.child.kill('SIGKILL');
    await entry.exited;
  });
  return entry;
}

async function get(entry: EntryProcess, url: string): Promise<Answer | undefined> {
  if (!isRunning(entry)) throw new Error(`${entry.name} exited:\n${entry.output().slice(-3000)}`);
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  } catch {
    return undefined; // not listening yet
  }
}

/** Ready with every dependency up; each cut one makes it unready naming it (alive all along), then ready again. */
async function checkContract(t: TestContext, entry: EntryProcess, baseUrl: string, relays: Record<Dependency, CuttableRelay>): Promise<void> {
  const ready = async (what: string): Promise<void> => {
    await waitFor(`${entry.name}: /readyz 200 ${what}`, async () => (await get(entry, `${baseUrl}/readyz`))?.status === 200, SETTLE_MS);
  };
  await ready('with every dependency up');
  for (const path of ['/livez', '/healthz']) assert.equal((await get(entry, `${baseUrl}${path}`))?.status, 200, `${entry.name} ${path}`);
  for (const dependency of DEPENDENCIES) {
    await relays[dependency].cut();
    t.diagnostic(`${entry.name}: ${dependency} cut`);
    const unready = await waitFor(
      `${entry.name}: /readyz 503 with ${dependency} cut`,
      async () => {
        const answer = await get(entry, `${baseUrl}/readyz`);
        return answer?.status === 503 ? answer : undefined;
      },
      SETTLE_MS,
    );
    assert.deepEqual([unready.body.status, unready.body.failed], ['unavailable', [dependency]], `${entry.name}: ${JSON.stringify(unready.body)}`);
    const alias = await get(entry, `${baseUrl}/healthz`);
    assert.deepEqual([alias?.status, alias?.body.failed], [503, [dependency]], `${entry.name}: /healthz is /readyz`);
    const live = await get(entry, `${baseUrl}/livez`);
    assert.deepEqual([live?.status, live?.body.status], [200, 'ok'], `${entry.name}: alive with ${dependency} cut`);
    await relays[dependency].restore();
    await ready(`once ${dependency} is back`);
  }
  assertJsonLines(entry);
}

const isJson = (line: string): boolean => {
  try {
    return typeof JSON.parse(line) === 'object';
  } catch {
    return false;
  }
};

/** Every line went through the process' logger; Node's own runtime warnings are not ours to format. */
function assertJsonLines(entry: EntryProcess): void {
  const lines = entry.output().split('\n');
  const plain = lines.filter((line) => line.trim() !== '' && !isJson(line) && !/^\(node:\d+\) |^\(Use `node --trace-/.test(line));
  assert.deepEqual(plain, [], `${entry.name}: lines not written through its JSON logger`);
  assert.ok(
    lines.some((line) => /"msg":"(postgres|redis)\([^"]*\): connection error/.test(line)),
    `${entry.name} logged the cut connections`,
  );
}

test('health: a worker process is unready while PostgreSQL, Redis or Temporal is unreachable, alive throughout, and ready again when it is back', async (t) => {
  const { relays, env } = await relayedDependencies(t);
  const port = await freePort();
  const worker = spawn(t, 'gateway worker', 'src/workers/gateway.ts', { ...env, WORKER_METRICS_HOST: '127.0.0.1', WORKER_METRICS_PORT: String(port) });
  await checkContract(t, worker, `http://127.0.0.1:${port}`, relays);
  const live = await get(worker, `http://127.0.0.1:${port}/livez`);
  assert.deepEqual(
    (live?.body as { workers?: { state: string }[] } | undefined)?.workers?.map((w) => w.state),
    ['RUNNING'],
    'the gateway worker still runs',
  );
});

test('health: the API is unready while PostgreSQL, Redis or Temporal is unreachable, alive throughout, and ready again when it is back', async (t) => {
  const { relays, env } = await relayedDependencies(t);
  const port = await freePort();
  const api = spawn(t, 'API', 'src/api/main.ts', { ...env, API_HOST: '127.0.0.1', API_PORT: String(port) });
  await checkContract(t, api, `http://127.0.0.1:${port}`, relays);
});
