import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LoadingCache } from '../../src/runtime/loadingCache.js';

test('concurrent gets share one load; the value is kept for the TTL, then loaded again', async () => {
  let clock = 0;
  const cache = new LoadingCache<string, number>(1000, () => clock);
  let loads = 0;
  let finish: (value: number) => void = () => undefined;
  const load = (): Promise<number> => {
    loads += 1;
    return new Promise<number>((resolve) => (finish = resolve));
  };
  const waiting = Array.from({ length: 50 }, () => cache.get('k', load));
  assert.equal(loads, 1, 'fifty callers during one load fire one query');
  finish(7);
  assert.deepEqual(await Promise.all(waiting), Array(50).fill(7));
  clock = 999;
  assert.equal(await cache.get('k', load), 7);
  assert.equal(loads, 1);
  clock = 1000;
  const again = cache.get('k', load);
  assert.equal(loads, 2, 'expired after the TTL');
  finish(8);
  assert.equal(await again, 8);
});

test('a failed load is not kept; refresh bypasses a fresh value', async () => {
  const cache = new LoadingCache<string, number>(60_000, () => 0);
  await assert.rejects(cache.get('k', () => Promise.reject(new Error('database away'))));
  assert.equal(await cache.get('k', () => Promise.resolve(1)), 1, 'loaded again after the failure');
  assert.equal(await cache.get('k', () => Promise.resolve(2)), 1, 'fresh');
  assert.equal(await cache.get('k', () => Promise.resolve(3), true), 3, 'refresh');
  cache.clear();
  assert.equal(await cache.get('k', () => Promise.resolve(4)), 4);
});

test('stale-if-error: a reload that meets an unreachable database answers the last good value, logged once; other errors still fail', async () => {
  let clock = 0;
  const events: string[] = [];
  const unreachable = (error: unknown): boolean => error instanceof Error && error.message === 'unreachable';
  const cache = new LoadingCache<string, number>(1000, {
    now: () => clock,
    staleIfError: unreachable,
    onStale: (key, stale) => void events.push(`${key}:${stale ? 'stale' : 'fresh'}`),
  });
  await assert.rejects(
    cache.get('k', () => Promise.reject(new Error('unreachable'))),
    'nothing to fall back on yet',
  );
  assert.equal(await cache.get('k', () => Promise.resolve(1)), 1);
  clock = 1000;
  let loads = 0;
  const away = (): Promise<number> => {
    loads += 1;
    return Promise.reject(new Error('unreachable'));
  };
  assert.equal(await cache.get('k', away), 1, 'last good value');
  assert.equal(await cache.get('k', away), 1);
  assert.equal(loads, 1, 'the stale value is kept for a TTL before the next attempt');
  clock = 2000;
  assert.equal(await cache.get('k', away), 1);
  assert.equal(loads, 2);
  assert.equal(cache.isStale('k'), true);
  assert.deepEqual(events, ['k:stale'], 'one line per outage, not per call');
  await assert.rejects(
    cache.get('k', () => Promise.reject(new Error('syntax error')), true),
    /syntax error/,
  );
  cache.expireAll();
  assert.equal(await cache.get('k', away), 1, 'invalidation keeps the fallback');
  assert.equal(await cache.get('k', () => Promise.resolve(2), true), 2);
  assert.deepEqual(events, ['k:stale', 'k:fresh']);
  assert.equal(cache.isStale('k'), false);
});
