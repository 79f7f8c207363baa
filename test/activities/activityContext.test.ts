/**
 * The activities that use their Temporal context, in `MockActivityEnvironment` (no services): the
 * mode switch heartbeats while it rebuilds, the claim round hands back its earlier claims on a retry
 * (attempt > 1) even in client start mode, and a gateway step's call is cancelled with its activity.
 * Their collaborators (store, reference data, limiter, gateway client) are recorders.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createControlActivities, type ControlActivityDeps } from '../../src/activities/control.js';
import { createGatewayActivities, type GatewayActivityDeps } from '../../src/activities/gateway.js';
import { GatewayError } from '../../src/gateway/errors.js';
import type { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import type { ReferenceData } from '../../src/runtime/referenceData.js';
import type { RedisRateLimiter } from '../../src/ratelimit/limiter.js';
import type { GatewayClient } from '../../src/gateway/client.js';
import type { CardStarter } from '../../src/app/cardStarter.js';
import type { Carrier } from '../../src/domain/carrier.js';
import type { ClaimRoundInput, ClaimedCard } from '../../src/workflow-safe/claimRound.js';
import type { GatewayStepInput } from '../../src/workflow-safe/cardRun.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';

/** A collaborator with only the members a test gives it; calling any other one fails the test. */
const partial = <T>(members: Partial<T>): T => members as T;

/** The activities' failures provoked here are the point: the environment's warnings about them are noise. */
const mockEnv = (info: { attempt?: number } = {}): MockActivityEnvironment => new MockActivityEnvironment(info, { logger: new DefaultLogger('ERROR') });

/** Runs `fn` in the mock activity context (typed: the environment's own signature loses the result type). */
const inContext = <R>(env: MockActivityEnvironment, fn: () => Promise<R>): Promise<R> => env.run<[], R, () => Promise<R>>(fn);

test('switchMode: the rebuild heartbeats through the activity context, and reference data is re-read after it', async () => {
  let invalidated = 0;
  const deps = partial<ControlActivityDeps>({
    modes: {
      async switchMode(_mode, _actor, heartbeat) {
        // A rebuild of millions of cards: a heartbeat per chunk keeps the activity alive.
        for (let chunk = 0; chunk < 3; chunk += 1) heartbeat();
        return { changed: true };
      },
    },
    reference: partial<ReferenceData>({ invalidate: () => void (invalidated += 1) }),
  });
  const env = mockEnv();
  let heartbeats = 0;
  env.on('heartbeat', () => void (heartbeats += 1));
  const result = await inContext(env, () => createControlActivities(deps).switchMode({ mode: 'carrier', actor: 'test' }));
  assert.deepEqual(result, { changed: true });
  assert.equal(heartbeats, 3);
  assert.equal(invalidated, 1);
});

function claimDeps(
  claims: { retry: boolean | undefined }[],
  starter: CardStarter | undefined,
  options: { mode?: 'child' | 'client'; claimed?: (prefix: string) => ClaimedCard[]; released?: string[] } = {},
): ControlActivityDeps {
  const store = partial<CarrierQueueStore>({
    async takeStartStats() {
      return { starts: 0, lagSumMs: 0, queueStarts: 0, queueLagSumMs: 0 };
    },
    async claim(input) {
      claims.push({ retry: input.retry });
      return { claimed: options.claimed?.(input.tokenPrefix) ?? [{ cardId: '42', token: `${input.tokenPrefix}@1:42`, fromPriority: false }], expired: 0 };
    },
    async depths() {
      return { running: 1, priority: 0, normal: 0 };
    },
    async dueNowCount() {
      return 0;
    },
    async release(_carrierId, cardId) {
      options.released?.push(cardId);
      return true;
    },
  });
  const carrier = partial<Carrier>({
    enabled: true,
    groups: [{ name: 'main', qps: 10 }],
    inflightLimit: 50,
    leaseMs: 20_000,
    priorityRatio: 0.5,
    typeGroups: { card_status: 'main' },
    realnameControl: false,
  });
  const reference = partial<ReferenceData>({
    invalidate: () => undefined,
    carrier: async () => carrier,
    pollingMode: async () => 'carrier',
    intervals: async () =>
      partial<Awaited<ReturnType<ReferenceData['intervals']>>>({ shortestMs: () => 60_000, typesPolledBy: (): CheckType[] => ['card_status'] }),
  });
  const limiter = partial<RedisRateLimiter>({
    async roundView() {
      return { budget: { main: 10 }, rates: { main: 10 } };
    },
  });
  return partial<ControlActivityDeps>({
    store,
    reference,
    limiter,
    ...(starter ? { cardStarter: starter } : {}),
    cardStartMode: options.mode ?? (starter ? 'client' : 'child'),
  });
}

const ROUND: ClaimRoundInput = {
  carrierId: '7',
  tokenPrefix: 'run-a.7',
  refreshConfig: false,
  cardRuns: { taskQueues: { control: 'c', card: 'k', gateway: 'g', ingest: 'i' }, workflowIdPrefix: '', claimedBy: 'test' },
};

test('claimRound: a claim under a round token prefix already used is a retry — always in child start mode, from attempt 2 in client start mode', async () => {
  const starter = partial<CardStarter>({ start: async () => [] });
  for (const [mode, attempt, expected] of [
    ['child', 1, true],
    ['child', 2, true],
    // Client start mode: the first attempt's runs would be started twice if it took its claims back.
    ['client', 1, false],
    ['client', 2, true],
  ] as const) {
    const claims: { retry: boolean | undefined }[] = [];
    const activities = createControlActivities(claimDeps(claims, mode === 'client' ? starter : undefined));
    const result = await inContext(mockEnv({ attempt }), () => activities.claimRound(ROUND));
    assert.equal(result.kind, 'claimed');
    assert.deepEqual(claims, [{ retry: expected }], `${mode} start mode, attempt ${attempt}`);
    assert.equal(result.kind === 'claimed' && result.startedByClaim, mode === 'client');
  }
});

test('claimRound in child start mode starts the priority lane’s runs itself and leaves the others to the scheduler; a failed start is released', async () => {
  const started: string[][] = [];
  const starter = partial<CardStarter>({
    async start(request) {
      started.push(request.cards.map((card) => card.cardId));
      return request.cards.filter((card) => card.cardId === 'p2');
    },
  });
  const released: string[] = [];
  const claimed = (prefix: string): ClaimedCard[] => [
    { cardId: 'p1', token: `${prefix}@1:p1`, fromPriority: true },
    { cardId: 'p2', token: `${prefix}@1:p2`, fromPriority: true },
    { cardId: 'n1', token: `${prefix}@1:n1`, fromPriority: false },
  ];
  const activities = createControlActivities(claimDeps([], starter, { mode: 'child', claimed, released }));
  const result = await inContext(mockEnv(), () => activities.claimRound(ROUND));
  assert.equal(result.kind, 'claimed');
  if (result.kind !== 'claimed') return;
  assert.deepEqual(started, [['p1', 'p2']], 'only the priority cards, by the client');
  assert.equal(result.startedByClaim, false);
  assert.equal(result.priorityStartedByClaim, true);
  assert.equal(result.startFailures, 1);
  assert.deepEqual(released, ['p2']);
  // No priority card: nothing started here, the flag absent (a result as older code gave it).
  const normalOnly = createControlActivities(claimDeps([], starter, { mode: 'child' }));
  const plain = await inContext(mockEnv(), () => normalOnly.claimRound(ROUND));
  assert.equal(plain.kind === 'claimed' && 'priorityStartedByClaim' in plain, false);
  assert.equal(started.length, 1);
});

const STEP: GatewayStepInput = {
  carrierId: '7',
  cardId: '42',
  token: 'run-a.7@1:42',
  executorId: 'run-b',
  leaseMs: 20_000,
  gatewayAccount: 'gw',
  iccid: '89860000000000000042',
  type: 'card_status',
  group: undefined,
  deadlineMs: Date.now() + 60_000,
};

function gatewayDeps(client: Partial<GatewayClient>, renewed = true, limiter: Partial<RedisRateLimiter> = {}): GatewayActivityDeps {
  return {
    client: partial<GatewayClient>(client),
    limiter: partial<RedisRateLimiter>(limiter),
    store: partial<CarrierQueueStore>({ renew: async () => renewed }),
  };
}

test('checkGateway: cancelling the activity aborts its gateway call (the call gets the activity’s signal)', async () => {
  let seen: AbortSignal | undefined;
  const deps = gatewayDeps({
    check: (_type, _request, options) =>
      new Promise((_resolve, reject) => {
        seen = options?.signal;
        options?.signal?.addEventListener('abort', () => reject(new GatewayError('transient', 'aborted', 'gateway call aborted by the caller')));
      }),
  });
  const env = mockEnv();
  const running = inContext(env, () => createGatewayActivities(deps).checkGateway(STEP));
  while (seen === undefined) await new Promise((resolve) => setImmediate(resolve));
  env.cancel();
  await assert.rejects(running);
  assert.equal(seen.aborted, true);
});

test('checkGateway: the limiter wait of a budgeted type is cancelled with the activity too', async () => {
  let seen: AbortSignal | undefined;
  const deps = gatewayDeps({}, true, {
    acquire: (_carrierId, _group, options) =>
      new Promise((_resolve, reject) => {
        seen = options?.signal;
        options?.signal?.addEventListener('abort', () => reject(new Error('limiter wait aborted')));
      }),
  });
  const env = mockEnv();
  const running = inContext(env, () => createGatewayActivities(deps).checkGateway({ ...STEP, group: 'main' }));
  while (seen === undefined) await new Promise((resolve) => setImmediate(resolve));
  env.cancel();
  await assert.rejects(running);
  assert.equal(seen.aborted, true);
});

test('checkGateway: lease gone — no call; a transient failure with time left is thrown to be retried, one at the deadline is the step’s failure', async () => {
  let calls = 0;
  const failing: Partial<GatewayClient> = {
    check: async () => {
      calls += 1;
      throw new GatewayError('transient', 'network', 'ECONNRESET');
    },
  };
  const env = mockEnv();
  assert.equal(await inContext(env, () => createGatewayActivities(gatewayDeps(failing, false)).checkGateway(STEP)), 'lease_lost');
  assert.equal(calls, 0);

  const thrown = await inContext(env, () => createGatewayActivities(gatewayDeps(failing)).checkGateway(STEP)).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(thrown instanceof ApplicationFailure && thrown.type === 'transient' && !thrown.nonRetryable, String(thrown));

  const atDeadline = await inContext(env, () => createGatewayActivities(gatewayDeps(failing)).checkGateway({ ...STEP, deadlineMs: Date.now() + 50 }));
  assert.ok(atDeadline !== 'lease_lost' && atDeadline.outcome === 'failure' && atDeadline.errorClass === 'transient', JSON.stringify(atDeadline));
});
