/**
 * The simulator's pushed events (docs/gateway-contract.md, 'Pushed events' and 'Simulator control
 * endpoints'): a local receiver checks every signature itself, the fields of each event, retries,
 * batches, the CloudEvents shape, and that a delivered push counts in the freshness ground truth.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SimWorld, type CardChange, type SimStats } from '../../src/simulator/model.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server.js';
import { configureAccount, setCardState, simStats } from './simHelpers.js';

const SECRET = 'push-test-secret';
const iccidOf = (i: number): string => `8986${String(i).padStart(15, '0')}`;

interface Received {
  readonly contentType: string | undefined;
  readonly account: string | undefined;
  readonly body: string;
  /** performance.now() at arrival (the simulator runs in this process: the same clock). */
  readonly arrivedAt: number;
}

interface Receiver {
  readonly url: string;
  readonly received: Received[];
  /** Requests whose signature did not verify (answered 401). */
  readonly badSignatures: string[];
  close(): Promise<void>;
}

type Answer = { readonly status: number; readonly headers?: Record<string, string> };

/** Recomputes the HMAC of `t.body` and compares; `t` must be within 300 s (the contract's window). */
function signatureValid(header: string | undefined, body: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match) return false;
  const [, t = '', v1 = ''] = match;
  if (Math.abs(Number(t) - Date.now() / 1000) > 300) return false;
  const expected = createHmac('sha256', SECRET).update(`${t}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(v1, 'hex'));
}

/** A receiver that verifies each request's signature and answers `answer(n)` (n = 1 for the first request), 202 by default. */
async function startReceiver(answer: (n: number) => Answer = () => ({ status: 202 })): Promise<Receiver> {
  const received: Received[] = [];
  const badSignatures: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const header = req.headers['x-cardpoller-signature'];
      if (!signatureValid(typeof header === 'string' ? header : undefined, body)) {
        badSignatures.push(body);
        res.writeHead(401).end();
        return;
      }
      received.push({
        contentType: req.headers['content-type'],
        account: req.headers['x-cardpoller-account'] as string | undefined,
        body,
        arrivedAt: performance.now(),
      });
      const { status, headers = {} } = answer(received.length);
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ accepted: 1, duplicates: 0 }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/events`,
    received,
    badSignatures,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function simCall(sim: RunningSimulator, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function registerCards(sim: RunningSimulator, account: string, iccids: readonly string[]): Promise<void> {
  assert.equal((await simCall(sim, 'POST', `/sim/accounts/${account}/cards`, { iccids })).status, 200);
}

async function startPushing(sim: RunningSimulator, account: string, settings: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await simCall(sim, 'PUT', `/sim/accounts/${account}/push`, { secret: SECRET, ...settings });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Polls `probe` until it gives a value (not undefined/false); fails naming `what` after 20 s. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const pushOf = (stats: SimStats, account: string): NonNullable<SimStats['accounts'][string]['push']> | undefined => stats.accounts[account]?.push;

/** Waits until every event of the account was delivered, failed or dropped, and at least `atLeast` were sent. */
async function settled(sim: RunningSimulator, account: string, atLeast = 1): Promise<NonNullable<SimStats['accounts'][string]['push']>> {
  return waitFor(`${account}'s pushes to settle`, async () => {
    const push = pushOf(await simStats(sim.url), account);
    return push !== undefined && push.sent >= atLeast && push.sent === push.delivered + push.failed + push.dropped && push;
  });
}

interface JsonEvent {
  id: string;
  type: string;
  iccid: string;
  observedAt: string;
  changedAt: string;
  observation: Record<string, unknown>;
}

const other = (network: unknown): 'online' | 'offline' => (network === 'online' ? 'offline' : 'online');

async function withSimulator(fn: (sim: RunningSimulator) => Promise<void>): Promise<void> {
  const sim = await startSimulator({ seed: 41 });
  try {
    await fn(sim);
  } finally {
    await sim.close();
  }
}

test('a set state pushes one signed event with the answer’s fields; its 2xx learns the change; types filter', () =>
  withSimulator(async (sim) => {
    const receiver = await startReceiver();
    try {
      const card = iccidOf(1);
      await registerCards(sim, 'acct', [card]);
      const settings = await startPushing(sim, 'acct', { url: receiver.url });
      assert.deepEqual(
        settings,
        { pushing: true, url: receiver.url, types: ['card_status', 'realname'], batchMs: 0, format: 'json' },
        'the secret is not echoed',
      );

      const network = other((await setCardState(sim.url, card, {})).network);
      await setCardState(sim.url, card, { network });
      const push = await settled(sim, 'acct');
      assert.deepEqual(push, { sent: 1, delivered: 1, failed: 0, retried: 0, dropped: 0 });
      assert.deepEqual(receiver.badSignatures, []);
      assert.equal(receiver.received.length, 1);
      const [request] = receiver.received;
      assert.equal(request?.contentType, 'application/json');
      assert.equal(request?.account, 'acct');
      const event = JSON.parse(request?.body ?? '') as JsonEvent;
      assert.match(event.id, /^sim-evt-[0-9a-z]+-\d+$/);
      assert.equal(event.type, 'card_status');
      assert.equal(event.iccid, card);
      assert.equal(event.observedAt, event.changedAt);
      assert.deepEqual(event.observation, { network, status: network === 'online' ? 'active' : 'suspended' });

      // Learned by the push alone (no check was made yet).
      const fresh = (await simStats(sim.url)).accounts.acct?.freshness?.card_status;
      assert.deepEqual([fresh?.changes, fresh?.learned, fresh?.pending], [1, 1, 0]);
      assert.ok((fresh?.stalenessMs?.max ?? -1) >= 0, JSON.stringify(fresh));
      // A check carries the same change instant; it learns nothing more.
      const res = await fetch(`${sim.url}/v1/checks/card_status`, { method: 'POST', body: JSON.stringify({ account: 'acct', iccid: card }) });
      assert.equal(((await res.json()) as { changedAt?: string }).changedAt, event.changedAt);
      assert.equal((await simStats(sim.url)).accounts.acct?.freshness?.card_status?.learned, 1);

      // Default types: a real-name change is pushed, a set usage is not.
      const realname = (await setCardState(sim.url, card, {})).realname === 'verified' ? 'unverified' : 'verified';
      await setCardState(sim.url, card, { realname, usageKb: 1234 });
      assert.equal(pushOf(await simStats(sim.url), 'acct')?.sent, 2, 'the realname event only');
      await settled(sim, 'acct', 2);
      assert.deepEqual((JSON.parse(receiver.received[1]?.body ?? '') as JsonEvent).observation, { realname });

      // carddata only: a set usage is pushed as the answer at that instant, a network change is not.
      await startPushing(sim, 'acct', { url: receiver.url, types: ['carddata'] });
      await setCardState(sim.url, card, { usageKb: 5000, network: other(network) });
      assert.equal(pushOf(await simStats(sim.url), 'acct')?.sent, 3);
      await settled(sim, 'acct', 3);
      const usage = JSON.parse(receiver.received[2]?.body ?? '') as JsonEvent;
      assert.equal(usage.type, 'carddata');
      assert.equal(usage.observation.usageKb, 5000);
      assert.match(String(usage.observation.periodStart), /^\d{4}-\d{2}-01$/);
      assert.equal(new Set(receiver.received.map((r) => (JSON.parse(r.body) as JsonEvent).id)).size, 3, 'ids are unique');
    } finally {
      await receiver.close();
    }
  }));

test('a delayed stop is pushed when it takes effect, untouched, stamped with its instant', () =>
  withSimulator(async (sim) => {
    const receiver = await startReceiver();
    try {
      const card = iccidOf(3);
      await registerCards(sim, 'later', [card]);
      await startPushing(sim, 'later', { url: receiver.url });
      const network = other((await setCardState(sim.url, card, {})).network);
      const setAt = Date.now();
      const answer = await setCardState(sim.url, card, { network, afterMs: 100 });
      assert.notEqual(answer.network, network, 'not yet');
      assert.equal(pushOf(await simStats(sim.url), 'later')?.sent, 0);
      // Nothing touches the card: the event leaves because the transition came due.
      await settled(sim, 'later');
      const event = JSON.parse(receiver.received[0]?.body ?? '') as JsonEvent;
      assert.deepEqual(event.observation.network, network);
      assert.ok(Date.parse(event.changedAt) >= setAt + 100, `${event.changedAt} vs set at ${new Date(setAt).toISOString()}`);
      assert.equal((await simStats(sim.url)).accounts.later?.freshness?.card_status?.learned, 1);
    } finally {
      await receiver.close();
    }
  }));

test('drift at a high rate: events arrive, each signed, and the freshness ground truth counts them learned', () =>
  withSimulator(async (sim) => {
    const receiver = await startReceiver();
    try {
      const cards = Array.from({ length: 40 }, (_, i) => iccidOf(100 + i));
      await registerCards(sim, 'drifty', cards);
      await startPushing(sim, 'drifty', { url: receiver.url });
      // 3600 an hour per card: each card changes about once a second.
      await configureAccount(sim.url, 'drifty', { changeRatePerHour: { card_status: 3600 } });
      await waitFor('20 pushed events', () => receiver.received.length >= 20);
      await configureAccount(sim.url, 'drifty', { changeRatePerHour: { card_status: 0 } });
      const push = await settled(sim, 'drifty', 20);
      const stats = await simStats(sim.url);

      assert.deepEqual(receiver.badSignatures, []);
      assert.equal(push.delivered, receiver.received.length);
      const events = receiver.received.map((r) => JSON.parse(r.body) as JsonEvent);
      assert.equal(new Set(events.map((e) => e.id)).size, events.length, 'ids are unique');
      for (const event of events) {
        assert.ok(cards.includes(event.iccid));
        assert.equal(event.type, 'card_status');
        assert.equal(event.changedAt, event.observedAt);
      }
      // No check was made: every learned change was learned by a push.
      const fresh = stats.accounts.drifty?.freshness?.card_status;
      assert.ok(fresh && fresh.learned >= 1 && fresh.learned <= push.delivered, JSON.stringify({ fresh, push }));
      assert.equal(fresh.changes, push.sent);
      assert.equal(fresh.learned + fresh.superseded + fresh.pending, fresh.changes);
      assert.ok(fresh.stalenessMs !== null && fresh.stalenessMs.p50 >= 0 && fresh.stalenessMs.max >= fresh.stalenessMs.p50, JSON.stringify(fresh));
    } finally {
      await receiver.close();
    }
  }));

test('503 twice then 202: delivered once after two re-sends of the same event; a 429’s Retry-After is honoured', () =>
  withSimulator(async (sim) => {
    const flaky = await startReceiver((n) => ({ status: n <= 2 ? 503 : 202 }));
    const throttling = await startReceiver((n) => (n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 202 }));
    try {
      await registerCards(sim, 'flaky', [iccidOf(1)]);
      await registerCards(sim, 'throttled', [iccidOf(2)]);
      await startPushing(sim, 'flaky', { url: flaky.url });
      await startPushing(sim, 'throttled', { url: throttling.url });
      await setCardState(sim.url, iccidOf(1), { network: other((await setCardState(sim.url, iccidOf(1), {})).network) });
      await setCardState(sim.url, iccidOf(2), { network: other((await setCardState(sim.url, iccidOf(2), {})).network) });

      assert.deepEqual(await settled(sim, 'flaky'), { sent: 1, delivered: 1, failed: 0, retried: 2, dropped: 0 });
      assert.equal(flaky.received.length, 3);
      assert.deepEqual(flaky.badSignatures, []);
      assert.equal(new Set(flaky.received.map((r) => r.body)).size, 1, 'the same event each time');
      assert.equal((await simStats(sim.url)).accounts.flaky?.freshness?.card_status?.learned, 1);

      assert.deepEqual(await settled(sim, 'throttled'), { sent: 1, delivered: 1, failed: 0, retried: 1, dropped: 0 });
      const [first, second] = throttling.received;
      // A backoff would have re-sent within ~200 ms; Retry-After: 1 holds it a second (a few ms of timer rounding allowed).
      assert.ok(first && second && second.arrivedAt - first.arrivedAt >= 990, `re-sent after ${String((second?.arrivedAt ?? 0) - (first?.arrivedAt ?? 0))} ms`);
    } finally {
      await flaky.close();
      await throttling.close();
    }
  }));

test('a 4xx fails without a retry; stopping while a retry waits drops the event', () =>
  withSimulator(async (sim) => {
    const refusing = await startReceiver(() => ({ status: 404 }));
    const down = await startReceiver(() => ({ status: 503 }));
    try {
      await registerCards(sim, 'refused', [iccidOf(1)]);
      await registerCards(sim, 'down', [iccidOf(2)]);
      await startPushing(sim, 'refused', { url: refusing.url });
      await startPushing(sim, 'down', { url: down.url });
      await setCardState(sim.url, iccidOf(1), { realname: 'verified' });
      await setCardState(sim.url, iccidOf(1), { realname: 'unverified' });
      await setCardState(sim.url, iccidOf(2), { network: other((await setCardState(sim.url, iccidOf(2), {})).network) });

      const refused = await settled(sim, 'refused');
      assert.equal(refused.failed, refused.sent);
      assert.deepEqual([refused.delivered, refused.retried, refused.dropped], [0, 0, 0]);
      assert.equal(refusing.received.length, refused.sent);

      await waitFor('a first attempt at the down receiver', () => down.received.length >= 1);
      assert.deepEqual((await simCall(sim, 'DELETE', '/sim/accounts/down/push')).body, { pushing: false });
      const dropped = await settled(sim, 'down');
      assert.deepEqual([dropped.sent, dropped.delivered, dropped.failed, dropped.dropped], [1, 0, 0, 1]);
      // Stopped: a change pushes nothing any more, and nothing was learned.
      await setCardState(sim.url, iccidOf(2), { network: other((await setCardState(sim.url, iccidOf(2), {})).network) });
      const stats = await simStats(sim.url);
      assert.equal(pushOf(stats, 'down')?.sent, 1);
      assert.equal(stats.accounts.down?.freshness?.card_status?.learned, 0);
    } finally {
      await refusing.close();
      await down.close();
    }
  }));

test('batchMs: a window’s events go in one request, at most 1000 of them', () =>
  withSimulator(async (sim) => {
    const receiver = await startReceiver();
    try {
      const cards = Array.from({ length: 5 }, (_, i) => iccidOf(i));
      await registerCards(sim, 'batched', cards);
      await startPushing(sim, 'batched', { url: receiver.url, batchMs: 1000 });
      const states = await Promise.all(cards.map((iccid) => setCardState(sim.url, iccid, {})));
      await Promise.all(cards.map((iccid, i) => setCardState(sim.url, iccid, { network: other(states[i]?.network) })));
      assert.equal((await settled(sim, 'batched', 5)).delivered, 5);
      const batches = receiver.received.map((r) => (JSON.parse(r.body) as { events: JsonEvent[] }).events);
      assert.ok(
        batches.every((events) => Array.isArray(events)),
        'a batch is { events: [...] }',
      );
      assert.deepEqual(
        batches
          .flat()
          .map((e) => e.iccid)
          .sort(),
        [...cards].sort(),
      );
      assert.ok(batches.length < 5 && Math.max(...batches.map((events) => events.length)) > 1, `sizes ${JSON.stringify(batches.map((b) => b.length))}`);

      // 1100 cards changing about once a second, a window of a minute: a request leaves at 1000 events.
      const many = Array.from({ length: 1100 }, (_, i) => iccidOf(10_000 + i));
      await registerCards(sim, 'many', many);
      const big = await startReceiver();
      try {
        await startPushing(sim, 'many', { url: big.url, batchMs: 60_000 });
        await configureAccount(sim.url, 'many', { changeRatePerHour: { realname: 3600 } });
        await waitFor('a full batch', () => big.received.length >= 1);
        await configureAccount(sim.url, 'many', { changeRatePerHour: { realname: 0 } });
        assert.equal((JSON.parse(big.received[0]?.body ?? '') as { events: JsonEvent[] }).events.length, 1000);
        await simCall(sim, 'DELETE', '/sim/accounts/many/push');
      } finally {
        await big.close();
      }
    } finally {
      await receiver.close();
    }
  }));

test('cloudevents: one event as application/cloudevents+json, a batch as an array', () =>
  withSimulator(async (sim) => {
    const single = await startReceiver();
    const batched = await startReceiver();
    try {
      const card = iccidOf(7);
      await registerCards(sim, 'ce', [card]);
      await registerCards(sim, 'ceb', [iccidOf(8), iccidOf(9)]);
      await startPushing(sim, 'ce', { url: single.url, format: 'cloudevents' });
      await startPushing(sim, 'ceb', { url: batched.url, format: 'cloudevents', batchMs: 500 });

      const realname = (await setCardState(sim.url, card, {})).realname === 'verified' ? 'unverified' : 'verified';
      await setCardState(sim.url, card, { realname });
      await settled(sim, 'ce');
      assert.equal(single.received[0]?.contentType, 'application/cloudevents+json');
      const event = JSON.parse(single.received[0]?.body ?? '') as Record<string, unknown> & { data: { changedAt: string }; time: string; id: string };
      assert.match(event.id, /^sim-evt-/);
      assert.match(event.time, /^\d{4}-\d{2}-\d{2}T/);
      assert.deepEqual(event, {
        specversion: '1.0',
        id: event.id,
        source: 'cardpoller-simulator/ce',
        type: 'cardpoller.card.realname',
        subject: card,
        time: event.time,
        datacontenttype: 'application/json',
        data: { observation: { realname }, changedAt: event.time },
      });

      await Promise.all([iccidOf(8), iccidOf(9)].map((iccid) => setCardState(sim.url, iccid, { network: 'offline' })));
      await Promise.all([iccidOf(8), iccidOf(9)].map((iccid) => setCardState(sim.url, iccid, { network: 'online' })));
      const push = await settled(sim, 'ceb', 2);
      const arrays = batched.received.map((r) => {
        assert.equal(r.contentType, 'application/cloudevents-batch+json');
        return JSON.parse(r.body) as { specversion: string; type: string; subject: string }[];
      });
      assert.ok(arrays.every((array) => Array.isArray(array)));
      assert.equal(arrays.flat().length, push.delivered);
      for (const ce of arrays.flat()) assert.deepEqual([ce.specversion, ce.type], ['1.0', 'cardpoller.card.card_status']);
    } finally {
      await single.close();
      await batched.close();
    }
  }));

test('a bad push body is a 400 naming the field; nothing starts pushing', () =>
  withSimulator(async (sim) => {
    const url = 'http://127.0.0.1:9/v1/events';
    const cases: [Record<string, unknown>, string][] = [
      [{ secret: 's' }, 'url'],
      [{ url: 'ftp://example.com/x', secret: 's' }, 'url'],
      [{ url, secret: '' }, 'secret'],
      [{ url, secret: 'x'.repeat(201) }, 'secret'],
      [{ url, secret: 's', types: ['card_status', 'sms'] }, 'types'],
      [{ url, secret: 's', batchMs: -5 }, 'batchMs'],
      [{ url, secret: 's', format: 'xml' }, 'format'],
    ];
    for (const [body, field] of cases) {
      const res = await simCall(sim, 'PUT', '/sim/accounts/bad/push', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      const message = (res.body.error as { message: string }).message;
      assert.ok(message.startsWith(`${field}`), `${JSON.stringify(body)} → ${message}`);
    }
    assert.equal(pushOf(await simStats(sim.url), 'bad'), undefined);
    assert.deepEqual((await simCall(sim, 'DELETE', '/sim/accounts/bad/push')).body, { pushing: false });
  }));

test('a listener draws nothing from the world’s randomness, sees each change after it, and a push learns only the change it carried', () => {
  const run = (listen: boolean): { changes: CardChange[]; world: SimWorld } => {
    const world = new SimWorld(9);
    const changes: CardChange[] = [];
    if (listen) world.onChange = (change) => changes.push(change);
    world.updateAccount('a', { changeRatePerHour: { card_status: 2, realname: 1 } });
    for (let i = 0; i < 50; i += 1) world.attach(iccidOf(i), 'a');
    world.drift(0);
    world.drift(3_600_000);
    return { changes, world };
  };
  const quiet = run(false);
  const listened = run(true);
  assert.deepEqual(
    [listened.world.random(), listened.world.random()],
    [quiet.world.random(), quiet.world.random()],
    'the same sequence with or without a listener',
  );
  assert.equal(listened.changes.length, 150);

  const world = listened.world;
  const card = world.card(iccidOf(0));
  const seen: { network: string; serial: number | undefined }[] = [];
  world.onChange = (change) => seen.push({ network: card.network, serial: change.serial });
  const first = other(card.network);
  world.updateCard(card.iccid, { network: first });
  world.updateCard(card.iccid, { network: other(first) });
  assert.deepEqual(
    seen.map((s) => s.network),
    [first, other(first)],
    'the listener sees the new state',
  );
  const before = world.stats(false).accounts.a?.freshness?.card_status?.learned ?? 0;
  // The first change was overtaken: its push learns nothing; the second's does.
  world.pushDelivered(card.iccid, 'card_status', seen[0]?.serial ?? -1, 10);
  assert.equal(world.stats(false).accounts.a?.freshness?.card_status?.learned, before);
  world.pushDelivered(card.iccid, 'card_status', seen[1]?.serial ?? -1, 10);
  assert.equal(world.stats(false).accounts.a?.freshness?.card_status?.learned, before + 1);
});
