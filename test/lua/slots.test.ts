/**
 * Redis Cluster safety: every key a script receives hashes to one slot (CRC16 of the hash tag,
 * mod 16384). Checked on the calls the store really builds, for several accounts and namespaces;
 * then on every command, MULTI and pipeline the TypeScript code sends (store, limiter, ingest
 * stream, lifecycle readers), recorded on a single Redis, so `npm test` catches a cross-slot
 * command before the cluster suite does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/index.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { deleteMatching } from '../../testkit/redis.js';
import { RedisRateLimiter } from '../../src/ratelimit/limiter.js';
import { IngestStream } from '../../src/ingest/stream.js';
import { laneMembers, readDuesMany } from '../../src/lifecycle/queueStore.js';
import { accountKeys } from '../../src/redis/keys.js';
import { keySlot, hashTag } from '../../src/redis/slot.js';
import {
  CARRIER_SCRIPTS,
  acquireExecCall,
  claimCall,
  claimCandidatesCall,
  finishCall,
  holdClaimsCall,
  markIdleCall,
  releaseCall,
  removeCall,
  renewCall,
  requestCheckCall,
  upsertCall,
  wakeIfIdleCall,
  observedCall,
  type ScriptCall,
} from '../../src/redis/carrierScripts.js';
import { loadLuaSource } from '../../src/redis/scriptLoader.js';

function callsFor(namespace: string, carrierId: string): ScriptCall[] {
  const keys = accountKeys(namespace, carrierId);
  const now = 1;
  return [
    claimCandidatesCall(keys, { now, leaseMs: 1, inflightLimit: 1, priorityRatio: 0, tokenPrefix: 'p', typeGroups: {}, countRealname: false }),
    claimCall(keys, { now, leaseMs: 1, inflightLimit: 1, priorityRatio: 0, tokenPrefix: 'p', typeGroups: {}, countRealname: false, cards: ['42', '7'] }),
    acquireExecCall(keys, '42', 'p:42', 'w', 1, now),
    renewCall(keys, '42', 'p:42', 'w', 1, now),
    holdClaimsCall(
      keys,
      [
        { cardId: '42', token: 'p:42' },
        { cardId: '7', token: 'p:7' },
      ],
      1,
      now,
    ),
    finishCall(keys, { cardId: '42', token: 'p:42', now, set: { 'ok:card_status': 1 }, del: [] }),
    releaseCall(keys, '42', 'p:42', now),
    requestCheckCall(keys, { cardId: '42', now, cooldownMs: 0, lane: 'priority', types: ['card_status'] }),
    upsertCall(keys, { carrierId, cardId: '42', now, dues: { card_status: 1 } }),
    removeCall(keys, '42'),
    markIdleCall(keys, { now, longestMs: 60_000, horizonMs: 0, shortestMs: 2000 }),
    wakeIfIdleCall(keys, 1),
    observedCall(keys, { cardId: '7', now, type: 'card_status', observedAtMs: 1, intervalMs: 60_000, state: 'online' }),
  ];
}

test('known CRC16 slots (Redis Cluster spec vectors)', () => {
  assert.equal(keySlot('123456789'), 12739); // CRC16/XMODEM("123456789") = 0x31C3
  assert.equal(keySlot('foo'), 12182);
  assert.equal(keySlot('{user1000}.following'), keySlot('{user1000}.followers'));
  assert.equal(hashTag('foo{}{bar}'), 'foo{}{bar}', 'empty first tag: whole key');
  assert.equal(hashTag('foo{{bar}}zap'), '{bar', 'first { to first }');
});

test('every script receives keys of exactly one slot, and as many keys as it declares', () => {
  const slotsSeen = new Set<number>();
  for (const namespace of ['', 't:x:1234:']) {
    for (const carrierId of ['1', '2', '77', '1000001']) {
      const calls = callsFor(namespace, carrierId);
      assert.deepEqual(new Set(calls.map((call) => call.name)), new Set(Object.keys(CARRIER_SCRIPTS)), 'all scripts covered');
      for (const call of calls) {
        const declared = CARRIER_SCRIPTS[call.name].numberOfKeys;
        // claim: the account's three keys, then three per card of the round; holdClaims: two per card.
        const variable = 3 + (call.name === 'claim' ? 3 : 2) * 2;
        assert.equal(call.keys.length, declared === 'variable' ? variable : declared, `${call.name} key count`);
        const slots = new Set(call.keys.map(keySlot));
        assert.equal(slots.size, 1, `${call.name} for carrier ${carrierId} spans slots ${[...slots].join(',')}: ${call.keys.join(' ')}`);
        slotsSeen.add([...slots][0]!);
      }
    }
  }
  assert.ok(slotsSeen.size > 1, 'different accounts spread over slots');
});

test('scripts only build card keys from the declared base (no global key names in Lua)', () => {
  for (const name of Object.keys(CARRIER_SCRIPTS)) {
    const source = loadLuaSource(name);
    assert.doesNotMatch(source, /['"]poll(ing)?:/, `${name} must not spell key names itself`);
    assert.match(source, /^-- /, `${name} starts with its header`);
    assert.match(source, /KEYS\[1\]/, `${name} documents its KEYS`);
  }
});

interface SentCommand {
  readonly name: string;
  readonly keys: readonly string[];
  /** Set for commands of one explicit pipeline or MULTI (ioredis writes them to one stream object). */
  readonly pipeline: unknown;
}

/** A single-Redis connection that records every command with its keys; auto-pipelining off so only explicit pipelines group. */
async function recordingConnection(): Promise<{ redis: Redis; sent: SentCommand[] }> {
  const redis = new Redis(loadConfig().REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 3, enableAutoPipelining: false });
  await redis.connect();
  const sent: SentCommand[] = [];
  const original = redis.sendCommand.bind(redis);
  redis.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
    const [command, stream] = args;
    sent.push({ name: command.name, keys: command.getKeys().map(String), pipeline: stream });
    return original(...args);
  };
  return { redis, sent };
}

/** What a cluster would refuse: a command, or a pipeline / MULTI, whose keys span slots. */
function crossSlot(sent: readonly SentCommand[]): string[] {
  const problems: string[] = [];
  for (const command of sent) {
    const slots = new Set(command.keys.map(keySlot));
    if (slots.size > 1) problems.push(`${command.name} ${command.keys.join(' ')}`);
  }
  const pipelines = new Map<unknown, SentCommand[]>();
  for (const command of sent) {
    if (command.pipeline === undefined) continue;
    const group = pipelines.get(command.pipeline) ?? [];
    group.push(command);
    pipelines.set(command.pipeline, group);
  }
  for (const group of pipelines.values()) {
    const keys = group.flatMap((command) => command.keys);
    if (new Set(keys.map(keySlot)).size > 1) problems.push(`pipeline ${group.map((command) => `${command.name} ${command.keys.join(' ')}`).join('; ')}`);
  }
  return problems;
}

test('every command, MULTI and pipeline the TypeScript code sends stays in one slot (store, limiter, ingest stream, lifecycle readers)', async () => {
  const { redis, sent } = await recordingConnection();
  const namespace = `t:slots:${randomUUID().slice(0, 8)}:`;
  try {
    const store = new CarrierQueueStore(redis, namespace, { clock: 'redis' });
    const now = await store.clockNow();
    const accounts = ['1', '2', '77'];
    // Batches across accounts: one pipeline per slot.
    await store.upsertMany(accounts.flatMap((carrierId) => ['a', 'b'].map((cardId) => ({ carrierId, cardId, now, dues: { card_status: now - 1 } }))));
    for (const carrierId of accounts) {
      const { claimed } = await store.claim({
        carrierId,
        now,
        leaseMs: 10_000,
        inflightLimit: 10,
        priorityRatio: 0,
        tokenPrefix: `p${carrierId}`,
        typeGroups: {},
        countRealname: false,
      });
      const [first, second] = claimed;
      assert.ok(first && second, `claimed two cards of ${carrierId}`);
      assert.equal(await store.acquireExec(carrierId, first.cardId, first.token, 'w', 10_000, now), 'acquired');
      assert.equal(await store.renew(carrierId, first.cardId, first.token, 'w', 10_000, now), true);
      await store.finishWithRecord({ carrierId, cardId: first.cardId, token: first.token, now, set: { 'ok:card_status': now }, del: [], record: 'r' });
      await store.release(carrierId, second.cardId, second.token, now, 1000);
      await store.requestCheck({ carrierId, cardId: first.cardId, now, cooldownMs: 0, lane: 'priority', types: ['card_status'] });
      await store.recordStart(carrierId, 12);
      await store.takeStartStats(carrierId);
      await store.readDue(carrierId, first.cardId);
      await store.laneOf(carrierId, first.cardId);
      await store.depths(carrierId);
      await store.dueNowCount(carrierId);
      await readDuesMany(redis, namespace, carrierId, ['a', 'b']);
      for await (const members of laneMembers(redis, namespace, carrierId)) assert.ok(members.length > 0);
    }
    await store.moveCarrier({ fromCarrierId: '1', carrierId: '2', cardId: 'a', now, dues: { card_status: now } });
    await store.removeMany(accounts.map((carrierId) => ({ carrierId, cardId: 'b' })));

    const limiter = new RedisRateLimiter({ redis, namespace, qps: () => 5 });
    const attempt = await limiter.tryAcquire('1', 'g');
    assert.equal(attempt.granted, true);
    await limiter.remaining('1', ['g', 'h']);
    await limiter.roundView('2', ['g'], 1);
    await limiter.reportRateLimited('1', 'g', 500);

    const stream = new IngestStream(redis, namespace);
    await stream.ensureGroup();
    await stream.enqueue('{"r":1}');
    const entries = await stream.read(redis, 'c1', 10, 0);
    await stream.touch(
      'c1',
      entries.map((entry) => entry.id),
    );
    await stream.reclaim('c2', 0, 10);
    await stream.pruneConsumers(0, 'c2');
    await stream.ack(
      entries.map((entry) => entry.id),
      entries.length,
    );
    await stream.backlog();
    await stream.writeRate();

    assert.ok(
      sent.some((command) => command.pipeline !== undefined),
      'pipelines were recorded',
    );
    assert.deepEqual(crossSlot(sent), []);
    // The instrument itself: a pipeline over two accounts is caught.
    sent.length = 0;
    await redis.pipeline().zcard(store.keys('1').queue).zcard(store.keys('2').queue).exec();
    assert.equal(crossSlot(sent).length, 1);
  } finally {
    await deleteMatching(redis, `${namespace}*`);
    await redis.quit();
  }
});
