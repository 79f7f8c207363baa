/**
 * Every key a script touches is declared in its KEYS (docs/design.md, "Lua scripts (`lua/`)"):
 * Redis Cluster routes a script by its declared keys and documents undeclared access as
 * unsupported, so a script may not build a key name it was not given.
 *
 * Two checks: a structural one over every `lua/*.lua` (each key argument of a `redis.call` is a
 * name bound to `KEYS[...]`, or a parameter every caller passes such a name), and a behavioural one
 * that runs every carrier script through its production paths (the store, the limiter) with a
 * prelude that refuses any command on a key the call did not declare. Every test of `test/lua`
 * runs its scripts with that prelude too (fixture.ts), the model test's random interleavings
 * included.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { createTestRedis } from '../../testkit/redis.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { CARRIER_SCRIPTS } from '../../src/redis/carrierScripts.js';
import { LUA_DIR, loadLuaSource } from '../../src/redis/scriptLoader.js';
import { registerCheckedScripts } from './fixture.js';
import { RedisRateLimiter } from '../../src/ratelimit/limiter.js';

/** Commands whose every argument is a key, and commands without keys; any other takes its key first. */
const ALL_KEYS = new Set(['DEL', 'EXISTS', 'UNLINK', 'MGET', 'TOUCH']);
const NO_KEYS = new Set(['TIME']);

/** Top-level comma split (commas inside brackets and strings do not count). */
function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let current = '';
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') quote = ch;
    else if ('([{'.includes(ch)) depth += 1;
    else if (')]}'.includes(ch)) depth -= 1;
    else if (ch === ',' && depth === 0) {
      parts.push(current.trim());
      current = '';
      continue;
    }
    current += ch;
  }
  if (current.trim() !== '') parts.push(current.trim());
  return parts;
}

/** The text from `open` (an opening bracket's index) to its matching closing bracket, exclusive. */
function balanced(code: string, open: number): string {
  let depth = 0;
  let quote: string | null = null;
  for (let i = open; i < code.length; i += 1) {
    const ch = code[i]!;
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') quote = ch;
    else if ('([{'.includes(ch)) depth += 1;
    else if (')]}'.includes(ch)) {
      depth -= 1;
      if (depth === 0) return code.slice(open + 1, i);
    }
  }
  return code.slice(open + 1);
}

const IDENT = /^[A-Za-z_]\w*$/;
const KEYS_ITEM = /^KEYS\[[^\]]+\]$/;

/** What a script does with keys that it may not: the problems found, one line each. */
function undeclaredKeyUses(name: string, source: string): string[] {
  const code = source
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n');
  // Every value each name is bound to: assignments (also several at once), `for _, x in ipairs({a, b})`,
  // and function parameters (what each call passes). Index assignments `T[...] = v` per table.
  const bindings = new Map<string, string[]>();
  const bind = (n: string, value: string): void => void bindings.set(n, [...(bindings.get(n) ?? []), value.replace(/\s+end$/, '').trim()]);
  for (const match of code.matchAll(/(?<![\w.=<>~])(?:local\s+)?([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=(?!=)\s*([^\n]+)/g)) {
    if (/^(?:local\s+)?function\b/.test(match[0])) continue;
    const names = match[1]!.split(',').map((n) => n.trim());
    const values = splitTop(match[2]!);
    names.forEach((n, i) => bind(n, values[i] ?? 'nil'));
  }
  for (const match of code.matchAll(/for\s+[A-Za-z_]\w*\s*,\s*([A-Za-z_]\w*)\s+in\s+ipairs\(\s*\{([^}]*)\}\s*\)/g))
    for (const value of splitTop(match[2]!)) bind(match[1]!, value);
  const tables = new Map<string, string[]>();
  for (const match of code.matchAll(/(?<![\w.])([A-Za-z_]\w*)\[/g)) {
    const inside = balanced(code, match.index + match[1]!.length);
    const after = code.slice(match.index + match[1]!.length + inside.length + 2);
    const assigned = /^\s*=(?!=)\s*([^\n]+)/.exec(after);
    if (assigned) tables.set(match[1]!, [...(tables.get(match[1]!) ?? []), splitTop(assigned[1]!)[0] ?? 'nil']);
  }
  const parameters = new Set<string>();
  for (const match of code.matchAll(/local\s+function\s+([A-Za-z_]\w*)\s*\(([^)]*)\)/g)) {
    const fn = match[1]!;
    const params = match[2]!.split(',').map((p) => p.trim());
    for (const p of params) parameters.add(p);
    for (const call of code.matchAll(new RegExp(`(?<![\\w.])${fn}\\(`, 'g'))) {
      if (/function\s+$/.test(code.slice(Math.max(0, call.index - 16), call.index))) continue;
      const args = splitTop(balanced(code, call.index + fn.length));
      params.forEach((p, i) => bind(p, args[i] ?? 'nil'));
    }
  }
  const declaredKey = (expr: string, seen: Set<string> = new Set()): boolean => {
    if (KEYS_ITEM.test(expr)) return true;
    const indexed = /^([A-Za-z_]\w*)\[.+\]$/.exec(expr);
    if (indexed) {
      const values = tables.get(indexed[1]!) ?? [];
      return values.length > 0 && values.every((value) => declaredKey(value, seen));
    }
    if (!IDENT.test(expr)) return false;
    if (seen.has(expr)) return true;
    seen.add(expr);
    const values = bindings.get(expr) ?? [];
    // A parameter nobody passes anything: its function is not called in this script.
    if (values.length === 0) return parameters.has(expr);
    return values.every((value) => declaredKey(value, seen));
  };
  const problems: string[] = [];
  for (const match of code.matchAll(/redis\.call\(/g)) {
    const args = splitTop(balanced(code, match.index + 'redis.call'.length));
    const command = /^'([A-Za-z]+)'$/.exec(args[0] ?? '')?.[1]?.toUpperCase();
    if (command === undefined) {
      problems.push(`${name}: redis.call(${args[0] ?? ''}) names no command literally`);
      continue;
    }
    if (NO_KEYS.has(command)) continue;
    const keyArgs = ALL_KEYS.has(command) ? args.slice(1) : args.slice(1, 2);
    for (const arg of keyArgs) if (!declaredKey(arg)) problems.push(`${name}: ${command} on ${arg} (not a declared key)`);
  }
  return problems;
}

test('structure: every key argument of every redis.call in lua/*.lua is a declared key', () => {
  const scripts = readdirSync(LUA_DIR)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -4));
  assert.ok(scripts.length >= Object.keys(CARRIER_SCRIPTS).length + 1, scripts.join(','));
  const problems = scripts.flatMap((name) => undeclaredKeyUses(name, loadLuaSource(name)));
  assert.deepEqual(problems, []);
});

test('structure: the check itself finds a key built in the script', () => {
  const built = "local base = KEYS[1]\nlocal k = base .. 'x'\nredis.call('GET', k)\nlocal function f(key) return redis.call('GET', key) end\nf(base .. 'y')\n";
  assert.deepEqual(undeclaredKeyUses('built', built), ['built: GET on k (not a declared key)', 'built: GET on key (not a declared key)']);
  assert.deepEqual(undeclaredKeyUses('fine', "local a = KEYS[1]\nlocal function f(key) return redis.call('GET', key) end\nf(a)\nredis.call('DEL', a)\n"), []);
});

test('behaviour: every carrier script, through the store, touches only the keys its call declares', async () => {
  const t = await createTestRedis('lua-declared-keys');
  try {
    registerCheckedScripts(t.redis, [...Object.values(CARRIER_SCRIPTS), { name: 'rateLimit', numberOfKeys: 2 }]);
    const store = new CarrierQueueStore(t.redis, t.namespace);
    const c = 1;
    const now = 1_000_000;
    const claimArgs = {
      carrierId: c,
      leaseMs: 1_000,
      inflightLimit: 10,
      priorityRatio: 0.5,
      typeGroups: { card_status: 'g1', carddata: 'g1' },
      countRealname: false,
    };
    await store.upsert({ carrierId: c, cardId: 'a', now, dues: { card_status: now - 1, carddata: now - 120_000 } });
    await store.upsert({ carrierId: c, cardId: 'b', now, dues: { card_status: now - 1 } });
    await store.upsert({ carrierId: c, cardId: 'stray', now, dues: { card_status: now + 60_000, carddata: now - 120_000 } });
    await store.upsert({ carrierId: c, cardId: 'orphan', now, dues: { card_status: now - 1 } });
    await t.redis.set(store.keys(c).claim('orphan'), 'gone@1:orphan');
    assert.equal((await store.requestCheck({ carrierId: c, cardId: 'b', now, cooldownMs: 0, lane: 'priority', types: ['card_status'] })).status, 'requested');
    // Budgeted, a stray dropped, an orphan claim cleared.
    const first = await store.claim({ ...claimArgs, now, tokenPrefix: 'r1', groupBudget: { g1: 5 }, polledTypes: ['card_status'] });
    assert.deepEqual(first.claimed.map((x) => x.cardId).sort(), ['a', 'b', 'orphan']);
    // A retried round hands its claims back.
    assert.equal((await store.claim({ ...claimArgs, now, tokenPrefix: 'r1', retry: true })).claimed.length, 3);
    const token = (id: string) => first.claimed.find((x) => x.cardId === id)!.token;
    assert.equal(await store.acquireExec(c, 'a', token('a'), 'w1', 1_000, now), 'acquired');
    assert.equal(await store.renew(c, 'a', token('a'), 'w1', 1_000, now + 1), true);
    // A claim no run has taken up held, beside one whose run has (left alone).
    assert.equal(
      await store.holdClaims(
        c,
        [
          { cardId: 'a', token: token('a') },
          { cardId: 'b', token: token('b') },
        ],
        1_000,
        now + 1,
      ),
      1,
    );
    // The usual finish, with a record, then its replay.
    const usual = { carrierId: c, cardId: 'a', token: token('a'), now: now + 2, set: { 'due:card_status': now + 60_000 }, del: [], record: 'x' };
    assert.equal((await store.finishWithRecord(usual)).owned, true);
    assert.notEqual((await store.finishWithRecord(usual)).replayed, null);
    // A request after the claim: the other finish path; a status change during the claim marks it.
    await store.requestCheck({ carrierId: c, cardId: 'b', now: now + 3, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    await store.upsert({ carrierId: c, cardId: 'b', now: now + 3, dues: { card_status: now + 5, carddata: now + 5 } });
    assert.equal(
      await store.finish({ carrierId: c, cardId: 'b', token: token('b'), now: now + 4, set: { 'due:card_status': now + 60_000 }, del: ['due:carddata'] }),
      true,
    );
    assert.equal(await store.release(c, 'orphan', token('orphan'), now + 4, 500), true);
    // Leases run out: the next round reclaims a token whose card holds an exec right.
    await store.upsert({ carrierId: c, cardId: 'a', now: now + 5, dues: { card_status: now + 5 } });
    const second = await store.claim({ ...claimArgs, now: now + 10, tokenPrefix: 'r2' });
    assert.ok(second.claimed.length >= 1);
    assert.equal(await store.acquireExec(c, second.claimed[0]!.cardId, second.claimed[0]!.token, 'w2', 1_000, now + 10), 'acquired');
    const third = await store.claim({ ...claimArgs, now: now + 5_000, tokenPrefix: 'r3' });
    assert.ok(third.expired >= 1);
    assert.equal(await store.finish({ carrierId: c, cardId: 'a', token: token('a'), now: now + 5_001, set: {}, del: [], leaseLost: true }), false);
    assert.equal(await store.remove(c, 'b'), true);
    await store.moveCarrier({ fromCarrierId: c, carrierId: 2, cardId: 'a', now: now + 5_002, dues: { card_status: now } });
    // The shared limiter's script too.
    const limiter = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: async () => 5 });
    const acquired = await limiter.acquire(String(c), 'g1', { deadline: Date.now() + 2_000 });
    if (acquired.outcome === 'granted') await limiter.giveBack(acquired.slot);
    await limiter.reportRateLimited(String(c), 'g1', 100);
  } finally {
    await t.close();
  }
});
