import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server.js';
import { GatewayClient } from '../../src/gateway/client.js';
import { GatewayError } from '../../src/gateway/errors.js';
import { configureAccount, setCardState, simStats } from './simHelpers.js';

const ICCID = '89860000000000000001';

function isClass(errorClass: string, reason?: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof GatewayError, `expected GatewayError, got ${String(error)}`);
    assert.equal(error.errorClass, errorClass);
    if (reason !== undefined) assert.equal(error.reason, reason);
    return true;
  };
}

describe('gateway client against the simulator', () => {
  let sim: RunningSimulator;
  let client: GatewayClient;
  before(async () => {
    sim = await startSimulator({ seed: 7 });
    client = new GatewayClient({ baseUrl: sim.url });
  });
  after(async () => {
    client.close();
    await sim.close();
  });

  test('each check type returns a validated observation with time and collection id', async () => {
    const before = Date.now();
    const status = await client.check('card_status', { account: 'a1', iccid: ICCID });
    const data = await client.check('carddata', { account: 'a1', iccid: ICCID });
    const realname = await client.check('realname', { account: 'a1', iccid: ICCID });
    assert.ok(['online', 'offline'].includes(status.observation.network));
    assert.equal(typeof data.observation.usageKb, 'number');
    assert.ok(['verified', 'unverified'].includes(realname.observation.realname));
    for (const r of [status, data, realname]) {
      assert.ok(r.observedAtMs >= before - 1000 && r.observedAtMs <= Date.now() + 1000);
      assert.match(r.collectionId, /^sim-/);
    }
    assert.notEqual(status.collectionId, data.collectionId);
  });

  test('rate_limited carries the retry-after', async () => {
    await configureAccount(sim.url, 'a-rl', { groups: { g: 1 }, typeGroups: { card_status: 'g' } });
    await client.check('card_status', { account: 'a-rl', iccid: ICCID });
    await assert.rejects(client.check('card_status', { account: 'a-rl', iccid: ICCID }), (error) => {
      isClass('rate_limited', 'carrier')(error);
      const retry = (error as GatewayError).retryAfterMs ?? -1;
      assert.ok(retry > 0 && retry <= 1000, `retryAfterMs ${retry}`);
      return true;
    });
  });

  test('transient, permanent and invalid_response from the carrier', async () => {
    await configureAccount(sim.url, 'a-err', { errorRate: 1 });
    await assert.rejects(client.check('carddata', { account: 'a-err', iccid: ICCID }), isClass('transient', 'carrier'));
    await assert.rejects(client.check('carddata', { account: 'a1', iccid: 'not-an-iccid' }), isClass('permanent', 'carrier'));
    await configureAccount(sim.url, 'a-bad', { malformedRate: 1 });
    for (let i = 0; i < 6; i += 1) {
      await assert.rejects(client.check('realname', { account: 'a-bad', iccid: ICCID }), isClass('invalid_response', 'malformed'));
    }
  });

  test('timeouts: own timeout, step deadline, and no time left', async () => {
    await configureAccount(sim.url, 'a-slow', { timeoutRate: 1, timeoutHoldMs: 5000 });
    let started = Date.now();
    await assert.rejects(client.check('card_status', { account: 'a-slow', iccid: ICCID }, { timeoutMs: 150 }), isClass('transient', 'timeout'));
    assert.ok(Date.now() - started < 1000);
    started = Date.now();
    await assert.rejects(client.check('card_status', { account: 'a-slow', iccid: ICCID }, { deadline: Date.now() + 150 }), isClass('transient', 'timeout'));
    assert.ok(Date.now() - started < 1000);
    const callsBefore = (await simStats(sim.url)).accounts['a-slow']?.groups['default']?.calls;
    await assert.rejects(client.check('card_status', { account: 'a-slow', iccid: ICCID }, { deadline: Date.now() - 1 }), isClass('transient', 'timeout'));
    assert.equal((await simStats(sim.url)).accounts['a-slow']?.groups['default']?.calls, callsBefore, 'no call without time left');
  });

  test('aborted calls fail at once with reason aborted', async () => {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(client.check('card_status', { account: 'a-slow', iccid: ICCID }, { signal: controller.signal }), isClass('transient', 'aborted'));
    assert.ok(Date.now() - started < 1000);
    await assert.rejects(client.check('card_status', { account: 'a1', iccid: ICCID }, { signal: AbortSignal.abort() }), isClass('transient', 'aborted'));
  });

  test('sendBy: a call that gets a connection only after it is never sent; onSend reports when one is', async () => {
    await configureAccount(sim.url, 'a-held', { latencyMs: { p50: 400, p99: 400 } });
    const single = new GatewayClient({ baseUrl: sim.url, maxSockets: 1 });
    const late = '89860000000000000077';
    try {
      let sentAt = 0;
      const before = Date.now();
      const holder = single.check('card_status', { account: 'a-held', iccid: ICCID }, { onSend: (at) => (sentAt = at) });
      // Queued behind the holder's socket for ~400 ms, but its slot ends in 50 ms.
      await assert.rejects(
        single.check('card_status', { account: 'a1', iccid: late }, { sendBy: Date.now() + 50 }),
        isClass('transient', 'send_window_missed'),
      );
      const held = await holder;
      // onSend reports when the request went out, not when its answer came (the gateway holds it 400 ms).
      const answeredAt = Date.now();
      assert.ok(sentAt >= before && sentAt <= answeredAt - 300, `sent ${sentAt - before} ms after the call, answered ${answeredAt - sentAt} ms after sending`);
      assert.equal(held.sentAtMs, sentAt);
      assert.equal((await simStats(sim.url)).cards?.[late], undefined, 'the late call never reached the gateway');
      // With time left it goes out as usual (and the pool recovers from the dropped socket).
      const onTime = await single.check('card_status', { account: 'a1', iccid: late }, { sendBy: Date.now() + 1000 });
      assert.equal(onTime.iccid, late);
    } finally {
      single.close();
    }
  });

  test('card state changes: stop → offline after a delay, usage grows, realname flips', async () => {
    const iccid = '89860000000000000099';
    await setCardState(sim.url, iccid, { network: 'online', usageKb: 1000 });
    await setCardState(sim.url, iccid, { network: 'offline', afterMs: 200 });
    assert.equal((await client.check('card_status', { account: 'a1', iccid })).observation.network, 'online');
    await new Promise((resolve) => setTimeout(resolve, 250));
    const offline = await client.check('card_status', { account: 'a1', iccid });
    assert.deepEqual(offline.observation, { network: 'offline', status: 'suspended' });
    const usage1 = (await client.check('carddata', { account: 'a1', iccid })).observation.usageKb;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const usage2 = (await client.check('carddata', { account: 'a1', iccid })).observation.usageKb;
    assert.ok(usage1 >= 1000 && usage2 >= usage1, `usage ${usage1} → ${usage2}`);
    await configureAccount(sim.url, 'a-flip', { realnameFlipRate: 1 });
    const r1 = (await client.check('realname', { account: 'a-flip', iccid })).observation.realname;
    const r2 = (await client.check('realname', { account: 'a-flip', iccid })).observation.realname;
    assert.notEqual(r1, r2);
    const stats = await simStats(sim.url);
    assert.equal(stats.cards?.[iccid]?.maxConcurrent, 1);
  });

  test('same seed, same card states; stats count per sliding second', async () => {
    const other = await startSimulator({ seed: 7 });
    const otherClient = new GatewayClient({ baseUrl: other.url });
    try {
      const iccids = Array.from({ length: 20 }, (_, i) => `8986000000000000${String(1000 + i)}`);
      const a = await Promise.all(iccids.map((iccid) => client.check('realname', { account: 'seed', iccid })));
      const b = await Promise.all(iccids.map((iccid) => otherClient.check('realname', { account: 'seed', iccid })));
      assert.deepEqual(
        a.map((r) => r.observation),
        b.map((r) => r.observation),
      );
      const groups = (await simStats(other.url)).accounts['seed']?.groups['default'];
      assert.deepEqual({ calls: groups?.calls, rejected: groups?.rejected, maxPerSecond: groups?.maxPerSecond }, { calls: 20, rejected: 0, maxPerSecond: 20 });
    } finally {
      otherClient.close();
      await other.close();
    }
  });
});

describe('gateway client against odd servers', () => {
  let server: http.Server;
  let url: string;
  let connections = 0;
  let reply: (req: http.IncomingMessage, res: http.ServerResponse) => void = () => undefined;
  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => reply(req, res));
    });
    server.on('connection', () => (connections += 1));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const answer =
    (status: number, body: string, headers: Record<string, string> = {}) =>
    (_req: http.IncomingMessage, res: http.ServerResponse) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(body);
    };

  test('status codes without a contract body map by status; retry-after header is read', async () => {
    const client = new GatewayClient({ baseUrl: url });
    reply = answer(429, '', { 'retry-after': '2' });
    await assert.rejects(
      client.check('card_status', { account: 'x', iccid: ICCID }),
      (e) => isClass('rate_limited', 'http_status')(e) && (e as GatewayError).retryAfterMs === 2000,
    );
    reply = answer(502, 'Bad gateway');
    await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }), isClass('transient', 'http_status'));
    reply = answer(404, 'nope');
    await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }), isClass('permanent', 'http_status'));
    reply = answer(302, '', { location: '/elsewhere' });
    await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }), isClass('invalid_response', 'http_status'));
    reply = answer(500, JSON.stringify({ error: { class: 'unknown_class' } }));
    await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }), isClass('transient', 'http_status'));
    client.close();
  });

  test('2xx bodies that break the contract are invalid_response', async () => {
    const client = new GatewayClient({ baseUrl: url, maxResponseBytes: 1024 });
    const valid = {
      type: 'card_status',
      account: 'x',
      iccid: ICCID,
      collectionId: 'c1',
      observedAt: new Date().toISOString(),
      observation: { network: 'online', status: 'active' },
    };
    reply = answer(200, JSON.stringify(valid));
    assert.equal((await client.check('card_status', { account: 'x', iccid: ICCID })).collectionId, 'c1');
    for (const body of [
      '{"type":',
      JSON.stringify({ ...valid, iccid: '89860000000000000002' }),
      JSON.stringify({ ...valid, type: 'carddata' }),
      JSON.stringify({ ...valid, observation: { network: 'maybe', status: 'active' } }),
      JSON.stringify({ ...valid, observedAt: 'yesterday' }),
      JSON.stringify({ ...valid, pad: 'x'.repeat(2048) }),
    ]) {
      reply = answer(200, body);
      await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }), isClass('invalid_response', 'malformed'));
    }
    client.close();
  });

  test('keep-alive: sequential calls reuse one connection; unreachable gateway is transient/network', async () => {
    const client = new GatewayClient({ baseUrl: url });
    reply = answer(503, '');
    const before = connections;
    for (let i = 0; i < 5; i += 1) await assert.rejects(client.check('card_status', { account: 'x', iccid: ICCID }));
    assert.equal(connections - before, 1);
    client.close();
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const dead = new GatewayClient({ baseUrl: `http://127.0.0.1:${port}` });
    await assert.rejects(dead.check('card_status', { account: 'x', iccid: ICCID }), isClass('transient', 'network'));
    dead.close();
  });
});
