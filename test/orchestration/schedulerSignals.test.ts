/**
 * What carrierScheduler does with its request-check signals when their activity fails: the real
 * workflow on the real Temporal server, its control activities replaced by counting stand-ins (the
 * claim answers `idle`), so the test reads the loop's decisions — claim rounds, request attempts —
 * and not a rate.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { sandboxThreadOptions } from '../../src/workers/createWorker.js';
import type { ControlActivities } from '../../src/activities/control.js';
import { createControlActivities } from '../../src/activities/control.js';
import { listAudit } from '../../testkit/dbReads.js';
import type { ClaimRoundResult } from '../../src/workflow-safe/claimRound.js';
import type { RequestCheckInput, RequestCheckResult } from '../../src/workflow-safe/requestCheck.js';
import type { SchedulerStatus } from '../../src/workflow-safe/loopStatus.js';
import { carrierScheduler, type CarrierSchedulerArgs } from '../../src/workflows/carrierScheduler.js';
import { requestCheckSignal, schedulerStatusQuery } from '../../src/workflows/messages.js';
import { createTestDb } from '../../testkit/db.js';
import { installQuietWorkerRuntime } from '../../testkit/isolatedStack.js';
import { waitFor } from '../../testkit/seed.js';
import { bundleOnce, connectTestEnv, uniqueName } from '../../testkit/temporal.js';

const workflowsPath = fileURLToPath(new URL('../../src/workflows/index.ts', import.meta.url));

/** The loop's own activities, counted; `requestCheck` is the test's. */
function standIns(requestCheck: ControlActivities['requestCheck']): { activities: Partial<ControlActivities>; claims: () => number } {
  let claims = 0;
  return {
    claims: () => claims,
    activities: {
      claimRound: async (): Promise<ClaimRoundResult> => {
        claims += 1;
        return { kind: 'idle', reason: 'legacy_mode' };
      },
      releaseClaims: async () => 0,
      requeueDuePriorityItems: async () => 0,
      requestCheck,
    },
  };
}

const request = (cardId: string): RequestCheckInput => ({ cardId, types: ['card_status'], lane: 'priority', actor: 'test', source: 'signal-test' });

async function runScheduler(
  label: string,
  activities: Partial<ControlActivities>,
  extraArgs: Partial<CarrierSchedulerArgs>,
  body: (handle: { signal: (input: RequestCheckInput) => Promise<void>; status: () => Promise<SchedulerStatus> }) => Promise<void>,
): Promise<void> {
  installQuietWorkerRuntime();
  const env = await connectTestEnv();
  try {
    const taskQueue = uniqueName(label);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: await bundleOnce(workflowsPath),
      activities,
      ...sandboxThreadOptions('main'),
    });
    const args: CarrierSchedulerArgs = {
      carrierId: '7',
      taskQueues: { control: taskQueue, card: taskQueue, gateway: taskQueue, ingest: taskQueue },
      ...extraArgs,
    };
    const handle = await env.client.workflow.start(carrierScheduler, { taskQueue, workflowId: uniqueName(`${label}-7`), args: [args] });
    try {
      await worker.runUntil(
        body({
          signal: (input) => handle.signal(requestCheckSignal, input),
          status: () => handle.query(schedulerStatusQuery),
        }),
      );
    } finally {
      await handle.terminate('test finished').catch(() => undefined);
    }
  } finally {
    await env.teardown();
  }
}

test('carrierScheduler: a signal whose request-check is rejected for good (a data exception) is tried once, audited, dropped, and backs nothing off', async (t) => {
  const db = await createTestDb('sched-bad-signal');
  try {
    let attempts = 0;
    // The request-check service answering as PostgreSQL does for an id beyond bigint (22003).
    const real = createControlActivities({
      pool: db.pool,
      requests: {
        requestCheck: async (): Promise<RequestCheckResult> => {
          attempts += 1;
          throw Object.assign(new Error('value "99999999999999999999" is out of range for type bigint'), { code: '22003' });
        },
      },
    } as unknown as Parameters<typeof createControlActivities>[0]);
    const loop = standIns((input) => real.requestCheck(input));
    await runScheduler('sched-bad-signal', loop.activities, {}, async (scheduler) => {
      await waitFor('first claim rounds', async () => loop.claims() >= 2, 30_000);
      await scheduler.signal(request('4242'));
      const claimsAtSignal = loop.claims();
      await waitFor('claim rounds after the signal', async () => loop.claims() >= claimsAtSignal + 5, 60_000);
      t.diagnostic(`request-check attempts ${attempts}, claim rounds ${loop.claims() - claimsAtSignal} since the signal`);
      assert.equal(attempts, 1, `a request rejected for good is not retried (${attempts} attempts)`);
      const audit = await listAudit(db.pool, 'iot_card', '4242');
      assert.equal(audit.length, 1, JSON.stringify(audit));
      assert.equal(audit[0]!.action, 'request_check_dropped');
      assert.match(audit[0]!.reason ?? '', /22003/);
      assert.deepEqual(audit[0]!.after, request('4242'));
      const status = await scheduler.status();
      assert.equal(status.lastFailure, undefined, `a dropped signal is no failure of the loop: ${JSON.stringify(status.lastFailure)}`);
    });
  } finally {
    await db.close();
  }
});

test('carrierScheduler: with the request-check activity hanging (PostgreSQL away), claim rounds go on; signal work is bounded per tick and nothing is lost', async (t) => {
  // Each card's request-check hangs until the test releases it.
  const waiting = new Map<string, () => void>();
  let allReleased = false;
  const release = (cardId: string): void => {
    waiting.get(cardId)?.();
    waiting.delete(cardId);
  };
  const releaseAll = (): void => {
    allReleased = true;
    for (const cardId of [...waiting.keys()]) release(cardId);
  };
  const started: string[] = [];
  const served: string[] = [];
  const loop = standIns(async (input) => {
    const cardId = input.request.cardId;
    started.push(cardId);
    if (!allReleased) await new Promise<void>((resolve) => waiting.set(cardId, resolve));
    served.push(cardId);
    return { status: 'requested', requested: 1, types: { card_status: 'requested' } };
  });
  const inFlight = (): string[] => [...waiting.keys()].sort();
  await runScheduler('sched-slow-signal', loop.activities, { maxSignalsPerTick: 2 }, async (scheduler) => {
    // The worker's shutdown waits for the hanging activities: release them whatever happens here.
    try {
      await waitFor('first claim rounds', async () => loop.claims() >= 2, 30_000);
      await scheduler.signal(request('11'));
      await waitFor('the first request-check under way', async () => inFlight().length === 1, 30_000);
      for (const cardId of ['12', '13', '14', '15']) await scheduler.signal(request(cardId));
      let claims = loop.claims();
      // Within one activity timeout (10 s): no attempt times out, so none is retried meanwhile.
      await waitFor('claim rounds while a request-check hangs', async () => loop.claims() >= claims + 3, 9_000, 100);
      assert.deepEqual(inFlight(), ['11'], 'one batch at a time: the signals that came meanwhile wait for it');
      release('11');
      await waitFor('the next batch under way', async () => inFlight().length === 2, 30_000);
      claims = loop.claims();
      await waitFor('claim rounds while the next batch hangs', async () => loop.claims() >= claims + 3, 9_000, 100);
      t.diagnostic(`started ${started.join(',')}; in flight ${inFlight().join(',')}`);
      assert.deepEqual(inFlight(), ['12', '13'], 'at most maxSignalsPerTick at once, the oldest first; the rest stay queued');
      releaseAll();
      await waitFor('every signalled card requested', async () => served.length >= 5, 30_000);
      assert.deepEqual([...served].sort(), ['11', '12', '13', '14', '15']);
      assert.deepEqual([...started].sort(), ['11', '12', '13', '14', '15'], 'each signal handled once');
      assert.equal((await scheduler.status()).lastFailure, undefined);
    } finally {
      releaseAll();
    }
  });
});
