/**
 * Redis Cluster safety: every key a script receives hashes to one slot (CRC16 of the hash tag,
 * mod 16384). Checked on the calls the store really builds, for several accounts and namespaces.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accountKeys } from '../../src/redis/keys.js';
import { keySlot, hashTag } from '../../src/redis/slot.js';
import {
  CARRIER_SCRIPTS,
  acquireExecCall,
  claimCall,
  finishCall,
  releaseCall,
  removeCall,
  renewCall,
  requestCheckCall,
  upsertCall,
  type ScriptCall,
} from '../../src/redis/carrierScripts.js';
import { loadLuaSource } from '../../src/redis/scriptLoader.js';

function callsFor(namespace: string, carrierId: string): ScriptCall[] {
  const keys = accountKeys(namespace, carrierId);
  const now = 1;
  return [
    claimCall(keys, { now, leaseMs: 1, inflightLimit: 1, priorityRatio: 0, tokenPrefix: 'p', typeGroups: {}, countRealname: false }),
    acquireExecCall(keys, '42', 'p:42', 'w', 1, now),
    renewCall(keys, '42', 'p:42', 'w', 1, now),
    finishCall(keys, { cardId: '42', token: 'p:42', now, set: { 'ok:card_status': 1 }, del: [] }),
    releaseCall(keys, '42', 'p:42', now),
    requestCheckCall(keys, { cardId: '42', now, cooldownMs: 0, lane: 'priority', types: ['card_status'] }),
    upsertCall(keys, { carrierId, cardId: '42', now, dues: { card_status: 1 } }),
    removeCall(keys, '42'),
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
        assert.equal(call.keys.length, CARRIER_SCRIPTS[call.name].numberOfKeys, `${call.name} key count`);
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
