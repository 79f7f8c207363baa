/**
 * POST /v1/events (docs/gateway-contract.md, 'Pushed events'): signed carrier events stored before
 * the 202, applied once (observation, next due, confirmation), against real PostgreSQL and Redis.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack, type ApiStack, type ErrorAnswer } from './helpers.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';
import { ACCOUNT_HEADER, CLOUDEVENTS_BATCH, SIGNATURE_HEADER, signEvents } from '../../src/gateway/events.js';
import { applyPendingEvents, eventObservationId } from '../../src/events/applier.js';
import { EventApplierLoop } from '../../src/events/applierLoop.js';
import { eventCounter } from '../../src/events/metrics.js';
import { accountKeys } from '../../src/redis/keys.js';
import { listCardObservations } from '../../testkit/dbReads.js';

const SECRET = 'an-event-secret-of-the-account';
const INTERVAL_SEC = 3600;
const MAX_BACKLOG = 20;

let api: ApiStack;
let account: SeedAccount;

before(async () => {
  api = await createApiStack('api-events', { EVENTS_MAX_BACKLOG: MAX_BACKLOG });
  account = await seedAccount(api.stack, {
    name: 'ev71',
    qps: { main: 10 },
    typeGroups: { card_status: 'main', realname: 'main' },
    cards: 3,
    intervalsSec: { card_status: INTERVAL_SEC, realname: INTERVAL_SEC },
  });
  const patched = await api.call('PATCH', `/v1/carriers/${account.carrier.id}`, { eventSecret: SECRET });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  assert.equal(patched.body.eventSecretSet, true);
  assert.equal('eventSecret' in patched.body, false, 'the secret is never answered back');
});

after(async () => {
  await api.close();
});

let sequence = 0;
const nextId = (): string => `evt-${(sequence += 1)}`;

function statusEvent(iccid: string, network: 'online' | 'offline', observedAtMs: number, id = nextId()): Record<string, unknown> {
  return {
    id,
    type: 'card_status',
    iccid,
    observedAt: new Date(observedAtMs).toISOString(),
    changedAt: new Date(observedAtMs - 500).toISOString(),
    observation: { network, status: 'active' },
  };
}

interface Push {
  readonly secret?: string;
  readonly account?: string;
  readonly signedAtMs?: number;
  readonly contentType?: string;
  /** Sent instead of the signed body (a body changed after signing). */
  readonly sentBody?: string;
}

async function push(body: unknown, options: Push = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Record<string, unknown> }> {
  const raw = JSON.stringify(body);
  const signature = signEvents(options.secret ?? SECRET, raw, options.signedAtMs ?? Date.now());
  return api.call('POST', '/v1/events', options.sentBody ?? raw, {
    token: null,
    headers: {
      'content-type': options.contentType ?? 'application/json',
      [ACCOUNT_HEADER]: options.account ?? `${account.carrier.name}-gw`,
      [SIGNATURE_HEADER]: signature,
    },
  });
}

const applier = () => ({ pool: api.stack.deps.pool, store: api.stack.deps.store, reference: api.stack.deps.reference });

async function storedEvents(): Promise<number> {
  const { rows } = await api.stack.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM carrier_event');
  return rows[0]!.n;
}

async function dueHash(cardId: string): Promise<Record<string, string>> {
  return api.stack.deps.redis.hgetall(accountKeys(api.stack.redis.namespace, account.carrier.id).due(cardId));
}

test('a signed event is stored, applied once as the card’s observation, and moves its next check out by the interval', async () => {
  const card = account.cards[0]!;
  const observedAt = Date.now() - 2000;
  const event = statusEvent(card.iccid, 'offline', observedAt);
  const first = await push({ events: [event] });
  assert.equal(first.status, 202, JSON.stringify(first.body));
  assert.deepEqual(first.body, { accepted: 1, duplicates: 0 });
  const again = await push({ events: [event] });
  assert.deepEqual(again.body, { accepted: 0, duplicates: 1 }, 'the same id again is a duplicate');

  const dueBefore = Number((await dueHash(card.id))['due:card_status']);
  const batch = await applyPendingEvents(applier(), 100);
  assert.equal(batch.applied, 1);
  assert.equal(batch.schedule.moved, 1);
  assert.equal((await applyPendingEvents(applier(), 100)).events, 0, 'applied once');

  const observations = await listCardObservations(api.stack.db.pool, card.id);
  assert.deepEqual(
    observations.map((o) => [o.observationId, o.type, (o.payload as { network?: string }).network]),
    [[eventObservationId(account.carrier.id, String(event.id)), 'card_status', 'offline']],
  );
  const { rows } = await api.stack.db.pool.query<{ network_status: string }>('SELECT network_status FROM iot_card WHERE id = $1', [card.id]);
  assert.equal(rows[0]!.network_status, 'offline');
  const hash = await dueHash(card.id);
  assert.ok(dueBefore < observedAt + INTERVAL_SEC * 1000, 'the due was sooner than the event + interval');
  assert.equal(Number(hash['due:card_status']), observedAt + INTERVAL_SEC * 1000);
  assert.equal(Number(hash['ok:card_status']), observedAt);
  const { rows: changes } = await api.stack.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_change WHERE card_id = $1', [card.id]);
  assert.equal(changes[0]!.n, 0, 'a first sight of a card is a state, not a change');

  // An older event (a check saw a newer state since) is kept as history but moves nothing.
  await push({ events: [statusEvent(card.iccid, 'online', observedAt - 60_000)] });
  const older = await applyPendingEvents(applier(), 100);
  assert.equal(older.schedule.unchanged, 1);
  assert.equal(Number((await dueHash(card.id))['due:card_status']), observedAt + INTERVAL_SEC * 1000);
  const { rows: still } = await api.stack.db.pool.query<{ network_status: string }>('SELECT network_status FROM iot_card WHERE id = $1', [card.id]);
  assert.equal(still[0]!.network_status, 'offline', 'an older state never overwrites a newer one');
});

test('refused without storing anything: a wrong secret, a stale or missing signature, a body changed after signing', async () => {
  const before = await storedEvents();
  const body = { events: [statusEvent(account.cards[1]!.iccid, 'online', Date.now())] };
  const cases: [string, Push, string][] = [
    ['wrong secret', { secret: 'another-secret-of-16-chars' }, 'mismatch'],
    ['signed 301 s ago', { signedAtMs: Date.now() - 301_000 }, '300 s'],
    ['body changed after signing', { sentBody: JSON.stringify({ events: [{ ...body.events[0], id: 'evt-forged' }] }) }, 'mismatch'],
  ];
  for (const [what, options, reason] of cases) {
    const answer = await push(body, options);
    assert.equal(answer.status, 401, what);
    assert.equal((answer.body as unknown as ErrorAnswer).error.field, SIGNATURE_HEADER, what);
    assert.match((answer.body as unknown as ErrorAnswer).error.message, new RegExp(reason), what);
  }
  const unsigned = await api.call<ErrorAnswer>('POST', '/v1/events', JSON.stringify(body), {
    token: null,
    headers: { 'content-type': 'application/json', [ACCOUNT_HEADER]: `${account.carrier.name}-gw` },
  });
  assert.equal(unsigned.status, 401);
  assert.match(unsigned.body.error.message, /missing/);
  const unknown = await push(body, { account: 'nobody-gw' });
  assert.equal(unknown.status, 404);
  assert.equal(await storedEvents(), before);
});

test('an account without an event secret accepts no events (409), and says how to set one', async () => {
  const other = await seedAccount(api.stack, {
    name: 'ev72',
    qps: { main: 10 },
    typeGroups: { card_status: 'main' },
    cards: 1,
    intervalsSec: { card_status: 60 },
  });
  const answer = await push({ events: [statusEvent(other.cards[0]!.iccid, 'online', Date.now())] }, { account: `${other.carrier.name}-gw` });
  assert.equal(answer.status, 409);
  assert.match((answer.body as unknown as ErrorAnswer).error.message, /eventSecret/);
});

test('malformed events are refused whole with the field named (400), nothing stored', async () => {
  const before = await storedEvents();
  const good = statusEvent(account.cards[1]!.iccid, 'online', Date.now());
  const cases: [unknown, string, string?][] = [
    [{ events: [good, { ...statusEvent(account.cards[1]!.iccid, 'online', Date.now()), observedAt: 'yesterday' }] }, 'events[1].observedAt'],
    [{ events: [{ ...good, id: nextId(), observation: { network: 'sideways', status: 'active' } }] }, 'events[0].observation.network'],
    [{ events: [{ ...good, id: nextId(), type: 'package' }] }, 'events[0].type'],
    [{ events: [] }, 'events'],
    [
      [{ specversion: '0.3', id: 'x', source: 's', type: 'cardpoller.card.card_status', subject: good.iccid, time: good.observedAt, data: {} }],
      'events[0].specversion',
      CLOUDEVENTS_BATCH,
    ],
  ];
  for (const [body, field, contentType] of cases) {
    const answer = await push(body, contentType ? { contentType } : {});
    assert.equal(answer.status, 400, `${field}: ${JSON.stringify(answer.body)}`);
    assert.equal((answer.body as unknown as ErrorAnswer).error.field, field);
  }
  assert.equal(await storedEvents(), before);
});

test('CloudEvents: a batch is stored and applied like the contract’s events', async () => {
  const card = account.cards[1]!;
  const at = Date.now() - 1000;
  const cloud = (id: string, type: string, data: Record<string, unknown>) => ({
    specversion: '1.0',
    id,
    source: 'carrier/ev71',
    type: `cardpoller.card.${type}`,
    subject: card.iccid,
    time: new Date(at).toISOString(),
    datacontenttype: 'application/json',
    data,
  });
  const answer = await push(
    [
      cloud('ce-1', 'card_status', { observation: { network: 'online', status: 'active' } }),
      cloud('ce-2', 'realname', { observation: { realname: 'verified' } }),
    ],
    {
      contentType: CLOUDEVENTS_BATCH,
    },
  );
  assert.equal(answer.status, 202, JSON.stringify(answer.body));
  assert.deepEqual(answer.body, { accepted: 2, duplicates: 0 });
  const batch = await applyPendingEvents(applier(), 100);
  assert.equal(batch.applied, 2);
  const types = (await listCardObservations(api.stack.db.pool, card.id)).map((o) => o.type).sort();
  assert.deepEqual(types, ['card_status', 'realname']);
});

test('a pending confirmation is reached by an event showing the expected state, not by another; a pending request-check keeps its due', async () => {
  const card = account.cards[2]!;
  const key = accountKeys(api.stack.redis.namespace, account.carrier.id).due(card.id);
  const redis = api.stack.deps.redis;
  const soon = Date.now() + 30_000;
  await redis.hset(key, 'cfm:card_status', '30,60', 'exp:card_status', 'offline', 'due:card_status', String(soon));
  await push({ events: [statusEvent(card.iccid, 'online', Date.now() - 3000)] });
  assert.equal((await applyPendingEvents(applier(), 100)).schedule.unchanged, 1, 'another state: the confirmation goes on');
  assert.equal(await redis.hget(key, 'exp:card_status'), 'offline');
  assert.equal(Number(await redis.hget(key, 'due:card_status')), soon);

  const seen = Date.now() - 2000;
  await push({ events: [statusEvent(card.iccid, 'offline', seen)] });
  assert.equal((await applyPendingEvents(applier(), 100)).schedule.confirmed, 1);
  assert.equal(await redis.hget(key, 'exp:card_status'), null);
  assert.equal(await redis.hget(key, 'cfm:card_status'), null);
  assert.equal(Number(await redis.hget(key, 'due:card_status')), seen + INTERVAL_SEC * 1000, 'the interval resumes');

  const requested = Date.now();
  await redis.hset(key, 'req:card_status', String(requested), 'due:card_status', String(requested));
  await push({ events: [statusEvent(card.iccid, 'online', Date.now() - 1000)] });
  assert.equal((await applyPendingEvents(applier(), 100)).schedule.unchanged, 1);
  assert.equal(Number(await redis.hget(key, 'due:card_status')), requested, 'an operator’s request-check still gets its call');
});

test('an event for a card the account does not hold is stored, marked unknown_card and counted, never retried', async () => {
  const loop = new EventApplierLoop({ ...applier(), idleMs: 50, count: eventCounter(api.stack.deps.registry), log: () => undefined });
  loop.start();
  try {
    const answer = await push({ events: [statusEvent('89860000000000009999', 'online', Date.now())] });
    assert.equal(answer.status, 202);
    await waitFor(
      'the event marked',
      async () => (await api.stack.db.pool.query("SELECT 1 FROM carrier_event WHERE status = 'unknown_card'")).rowCount === 1,
      10_000,
      50,
    );
  } finally {
    await loop.stop();
  }
  const metrics = await api.stack.deps.registry.getSingleMetricAsString('cardpoller_events_total');
  assert.match(metrics, /cardpoller_events_total\{outcome="unknown_card"\} 1/);
  assert.match(metrics, /cardpoller_events_total\{outcome="accepted"\} \d+/);
});

test('over the backlog bound the whole request is refused with 429 and Retry-After, then accepted once applied', async () => {
  const card = account.cards[0]!;
  // Every earlier event is applied; the bound's count is read at most once a second.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const events = Array.from({ length: MAX_BACKLOG }, (_, i) => statusEvent(card.iccid, 'online', Date.now() - 10_000 + i));
  assert.equal((await push({ events })).status, 202);
  const over = await push({ events: [statusEvent(card.iccid, 'online', Date.now())] });
  assert.equal(over.status, 429);
  assert.equal(over.headers['retry-after'], '5');
  assert.equal((await applyPendingEvents(applier(), 100)).events, MAX_BACKLOG);
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.equal((await push({ events: [statusEvent(card.iccid, 'online', Date.now())] })).status, 202);
  await applyPendingEvents(applier(), 100);
});
