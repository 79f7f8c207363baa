/**
 * Piece by piece, what a card execution does when PostgreSQL cannot be reached (docs/design.md,
 * 'PostgreSQL and records': PostgreSQL unreachable in async mode). Real Redis and PostgreSQL, no
 * workers: the activities are called directly, over a pool that can be made to fail as an
 * unreachable database does (ECONNREFUSED), while the test's own pool still reads and writes. The
 * whole system through a real 60 s outage is test/faults-suite/ingestOutage.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { createCardActivities, UNREACHABLE_RETRY_MS, type CardActivities } from '../../src/activities/card.js';
import { createPackageEvaluator } from '../../src/activities/packageEvaluation.js';
import { ReferenceData } from '../../src/runtime/referenceData.js';
import type { PriorityClaims, PriorityTransitions } from '../../src/app/ports.js';
import { setIngestMode } from '../../src/db/systemConfig.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { writerSlots } from '../../src/ingest/service.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';

interface Switchable {
  readonly pool: Pool;
  down: boolean;
  /** The SQL text of every query sent through this pool, in order. */
  readonly sent: string[];
}

/** The stack's pool, except that every query fails as against a stopped server while `down`. */
function switchablePool(pool: Pool): Switchable {
  const state = { down: false };
  const sent: string[] = [];
  const proxy = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return (...args: unknown[]): Promise<unknown> => {
        sent.push(typeof args[0] === 'string' ? args[0] : JSON.stringify(args[0]));
        if (state.down)
          return Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5433'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' }));
        return (target.query as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  return Object.defineProperty({ pool: proxy, down: false, sent }, 'down', { get: () => state.down, set: (value: boolean) => void (state.down = value) });
}

interface Setup {
  readonly stack: Stack;
  readonly db: Switchable;
  readonly carrierId: string;
  readonly cardIds: string[];
  readonly activities: CardActivities;
  readonly lines: string[];
  claimAll(round: string): Promise<Map<string, string>>;
}

async function setup(stack: Stack, name: string, types: Partial<Record<CheckType, number>>, priority?: PriorityClaims & PriorityTransitions): Promise<Setup> {
  const account = await seedAccount(stack, { name, qps: { main: 50 }, typeGroups: { card_status: 'main' }, cards: 3, intervalsSec: types });
  const carrierId = account.carrier.id;
  const cardIds = account.cards.map((card) => card.id);
  const now = Date.now();
  for (const cardId of cardIds) await stack.deps.store.upsert({ carrierId, cardId, dues: Object.fromEntries(Object.keys(types).map((t) => [t, now - 1])) });
  const db = switchablePool(stack.deps.pool);
  const lines: string[] = [];
  // TTL 0: every call reloads, so each one meets the outage and must fall back.
  const reference = new ReferenceData(db.pool, { ttlMs: 0, log: (line) => void lines.push(line) });
  const activities = createCardActivities({
    pool: db.pool,
    store: stack.deps.store,
    reference,
    packages: createPackageEvaluator(db.pool),
    priority: priority ?? stack.services.priority,
    log: (line) => void lines.push(line),
  });
  return {
    stack,
    db,
    carrierId,
    cardIds,
    activities,
    lines,
    async claimAll(round) {
      const claim = await stack.deps.store.claim({
        carrierId,
        leaseMs: 60_000,
        inflightLimit: 10,
        priorityRatio: 0,
        tokenPrefix: round,
        typeGroups: {},
        countRealname: false,
      });
      return new Map(claim.claimed.map((c) => [c.cardId, c.token]));
    },
  };
}

test('async mode, PostgreSQL unreachable: a remembered card runs, its package is deferred, reference data is served stale and logged once', async () => {
  const stack = await createStack('outage-fallbacks');
  try {
    await setIngestMode(stack.deps.pool, 'async', 'test');
    const s = await setup(stack, 'fb1', { card_status: 600, package: 600 });
    const [remembered, unknown] = s.cardIds as [string, string, string];
    // Prepared once while PostgreSQL answers: this process remembers the row.
    let tokens = await s.claimAll('fb1.1');
    const first = await s.activities.prepareExecution({
      carrierId: s.carrierId,
      cardId: remembered,
      token: tokens.get(remembered)!,
      executorId: 'run-1',
      fromPriority: false,
    });
    assert.equal(first.kind, 'run');
    for (const [cardId, token] of tokens) await stack.deps.store.release(s.carrierId, cardId, token);

    s.db.down = true;
    tokens = await s.claimAll('fb1.2');
    const token = tokens.get(remembered)!;
    const plan = await s.activities.prepareExecution({ carrierId: s.carrierId, cardId: remembered, token, executorId: 'run-2', fromPriority: false });
    if (plan.kind !== 'run') assert.fail(`prepare answered ${plan.kind}`);
    assert.equal(plan.iccid, (await stack.deps.pool.query<{ iccid: string }>('SELECT iccid FROM iot_card WHERE id = $1::bigint', [remembered])).rows[0]!.iccid);
    assert.equal(plan.ingestMode, 'async');
    assert.deepEqual([...plan.types].sort(), ['card_status', 'package']);

    // The package check cannot read PostgreSQL: deferred well beyond the usual 1–2 s, no failure.
    const before = Date.now();
    const finished = await s.activities.finishExecution({
      carrierId: s.carrierId,
      cardId: remembered,
      token,
      plan,
      results: [
        {
          type: 'card_status',
          outcome: 'success',
          gatewayMs: 3,
          observation: { collectionId: 'fb1-status-1', observedAt: new Date().toISOString(), payload: { state: 'active' } },
        },
      ],
      startedAt: before,
      fromPriority: false,
      workflowId: `card-${remembered}`,
      runId: 'run-2',
    });
    assert.equal(finished.owned, true);
    assert.deepEqual(
      finished.results.map((r) => [r.type, r.outcome]),
      [
        ['card_status', 'success'],
        ['package', 'deferred'],
      ],
    );
    const state = await stack.deps.store.readDue(s.carrierId, remembered);
    assert.equal(state?.types.package.fail ?? 0, 0, 'no failure counted');
    assert.ok((state?.types.package.due ?? 0) >= before + 30_000, `package due again in ≥ 30 s, not 1–2 s (${(state?.types.package.due ?? 0) - before} ms)`);
    assert.ok((state?.types.card_status.due ?? 0) > before, 'card_status moved on');

    // A card this process never read is not run: released for a while, the run ends unprepared.
    const unknownToken = tokens.get(unknown)!;
    await assert.rejects(
      s.activities.prepareExecution({ carrierId: s.carrierId, cardId: unknown, token: unknownToken, executorId: 'run-3', fromPriority: false }),
      (error: unknown) => error instanceof ApplicationFailure && error.nonRetryable && error.type === 'database_unreachable',
    );
    const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(s.carrierId).queue, unknown));
    assert.ok(score >= Date.now() + UNREACHABLE_RETRY_MS - 2000, 'released with a retry-after');

    // Each cache said once that it serves stale data, and the card fallback once.
    const staleLines = s.lines.filter((line) => line.includes('PostgreSQL unreachable'));
    assert.equal(new Set(staleLines).size, staleLines.length, `a line repeated:\n${s.lines.join('\n')}`);
    assert.ok(staleLines.some((line) => line.startsWith('card executions:')));

    // PostgreSQL back: the card was disabled meanwhile; the next preparation reads it fresh and says so.
    s.db.down = false;
    await stack.deps.pool.query('UPDATE iot_card SET enable_polling = false WHERE id = $1::bigint', [remembered]);
    await stack.deps.store.upsert({ carrierId: s.carrierId, cardId: remembered, dues: { card_status: Date.now() - 1 } });
    tokens = await s.claimAll('fb1.3');
    const again = await s.activities.prepareExecution({
      carrierId: s.carrierId,
      cardId: remembered,
      token: tokens.get(remembered)!,
      executorId: 'run-4',
      fromPriority: false,
    });
    assert.equal(again.kind, 'not_polled');
    assert.ok(s.lines.some((line) => line.includes('read from PostgreSQL again')));
  } finally {
    await stack.close();
  }
});

test('the preparations of one turn (a batch flush) read their card rows in one statement', async () => {
  const stack = await createStack('outage-fallbacks-rows');
  try {
    const s = await setup(stack, 'rows', { card_status: 600 });
    const tokens = await s.claimAll('rows.1');
    const cardRows = (): number => s.db.sent.filter((sql) => sql.includes('FROM iot_card c')).length;
    const before = cardRows();
    const plans = await Promise.all(
      s.cardIds.map((cardId, i) =>
        s.activities.prepareExecution({ carrierId: s.carrierId, cardId, token: tokens.get(cardId)!, executorId: `run-${i}`, fromPriority: false }),
      ),
    );
    const iccids = await stack.deps.pool.query<{ id: string; iccid: string }>('SELECT id::text, iccid FROM iot_card WHERE id = ANY($1::bigint[])', [s.cardIds]);
    assert.deepEqual(
      plans.map((plan) => (plan.kind === 'run' ? plan.iccid : plan.kind)),
      s.cardIds.map((id) => iccids.rows.find((row) => row.id === id)!.iccid),
      'each card planned with its own row',
    );
    assert.equal(cardRows() - before, 1, `one card-row statement for ${s.cardIds.length} preparations`);
  } finally {
    await stack.close();
  }
});

test('PostgreSQL unreachable: sync mode fails the preparation as before; a card with a pending request waits for PostgreSQL', async () => {
  const stack = await createStack('outage-fallbacks-2');
  try {
    const claimed: string[] = [];
    const priority: PriorityClaims & PriorityTransitions = {
      claimForExecution: (input) => (claimed.push(input.cardId), Promise.resolve(undefined)),
      failForExecution: () => Promise.resolve(),
      executionFinished: () => Promise.resolve(),
    };
    const s = await setup(stack, 'fb2', { card_status: 600 }, priority);
    const [a, b] = s.cardIds as [string, string, string];
    let tokens = await s.claimAll('fb2.1');
    for (const cardId of [a, b])
      await s.activities.prepareExecution({ carrierId: s.carrierId, cardId, token: tokens.get(cardId)!, executorId: `run-${cardId}`, fromPriority: false });
    for (const [cardId, token] of tokens) await stack.deps.store.release(s.carrierId, cardId, token);

    // Sync mode (the default): the record would need PostgreSQL anyway, so nothing changes.
    s.db.down = true;
    tokens = await s.claimAll('fb2.2');
    await assert.rejects(
      s.activities.prepareExecution({ carrierId: s.carrierId, cardId: a, token: tokens.get(a)!, executorId: 'run-a2', fromPriority: false }),
      /ECONNREFUSED/,
    );
    for (const [cardId, token] of tokens) await stack.deps.store.release(s.carrierId, cardId, token);

    // Async mode (read while PostgreSQL answered), and a request-check pending on card b.
    s.db.down = false;
    await setIngestMode(stack.deps.pool, 'async', 'test');
    tokens = await s.claimAll('fb2.3');
    await s.activities.prepareExecution({ carrierId: s.carrierId, cardId: a, token: tokens.get(a)!, executorId: 'run-a3', fromPriority: false });
    for (const [cardId, token] of tokens) await stack.deps.store.release(s.carrierId, cardId, token);
    await stack.deps.store.requestCheck({ carrierId: s.carrierId, cardId: b, cooldownMs: 0, lane: 'priority', types: ['card_status'] });
    s.db.down = true;
    tokens = await s.claimAll('fb2.4');
    assert.equal(
      (await s.activities.prepareExecution({ carrierId: s.carrierId, cardId: a, token: tokens.get(a)!, executorId: 'run-a4', fromPriority: false })).kind,
      'run',
    );
    claimed.length = 0;
    await assert.rejects(
      s.activities.prepareExecution({ carrierId: s.carrierId, cardId: b, token: tokens.get(b)!, executorId: 'run-b4', fromPriority: true }),
      (error: unknown) => error instanceof ApplicationFailure && error.type === 'database_unreachable',
    );
    assert.deepEqual(claimed, [], 'no priority claim attempted');
    const state = await stack.deps.store.readDue(s.carrierId, b);
    assert.notEqual(state?.types.card_status.req ?? null, null, 'the request is still pending in Redis');
  } finally {
    await stack.close();
  }
});

test('the ingest leaves pool connections to the rest of its process: stalled batches never starve polling', async () => {
  const pools = [20, 5, 3].map((max) => createPool({ url: 'postgres://postgres:postgres@127.0.0.1:5433/cardpoller', schema: 'public', max }));
  try {
    assert.deepEqual(
      pools.map((pool) => writerSlots(pool, 30)),
      [16, 1, 1],
    );
    assert.equal(writerSlots(pools[0]!, 8), 8, 'a smaller configured concurrency stands');
  } finally {
    await Promise.all(pools.map((pool) => pool.end()));
  }
});
