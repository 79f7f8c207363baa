/** The rate-limited connection error log (src/runtime/connectionErrors.ts): pure logic, fake clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ConnectionErrorLog, describeConnectionError, logConnectionErrors } from '../../src/runtime/connectionErrors.js';

function fixture(): { log: ConnectionErrorLog; lines: string[]; advance: (ms: number) => void } {
  let now = 1_000_000;
  const lines: string[] = [];
  const log = new ConnectionErrorLog('redis(test)', { everyMs: 10_000, write: (line) => void lines.push(line), now: () => now });
  return { log, lines, advance: (ms) => void (now += ms) };
}

test('connection errors: the first is written at once, the rest at most once per interval with a count', () => {
  const { log, lines, advance } = fixture();
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
  log.error(refused);
  for (let i = 0; i < 5; i++) {
    advance(1000);
    log.error(refused);
  }
  assert.deepEqual(lines, ['redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379']);
  advance(5000);
  log.error(refused);
  assert.equal(lines[1], 'redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379 (5 more errors not shown)');
  advance(1000);
  log.error(refused);
  log.recovered();
  assert.equal(lines[2], 'redis(test): connected again (1 more error not shown)');
  // Recovery is written once, and the next outage's first error is written at once.
  log.recovered();
  log.error(refused);
  assert.equal(lines.length, 4);
  assert.equal(lines[3], 'redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379');
});

test('connection errors: recovery without a preceding error writes nothing', () => {
  const { log, lines } = fixture();
  log.recovered();
  assert.deepEqual(lines, []);
});

test('connection errors: described with their code, AggregateErrors by their parts', () => {
  const terminated = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
  assert.equal(describeConnectionError(terminated), 'terminating connection due to administrator command [57P01]');
  const both = new AggregateError([new Error('connect ECONNREFUSED ::1:5432'), new Error('connect ECONNREFUSED 127.0.0.1:5432')], '');
  assert.equal(describeConnectionError(both), 'connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432');
  assert.equal(describeConnectionError('plain'), 'plain');
});

test('connection errors: an emitter with the handler attached no longer throws on an error event', () => {
  const emitter = new EventEmitter();
  assert.throws(() => emitter.emit('error', new Error('lost')), /lost/);
  const lines: string[] = [];
  logConnectionErrors(emitter, 'postgres(test)', { write: (line) => void lines.push(line) });
  emitter.emit('error', new Error('lost'));
  assert.deepEqual(lines, ['postgres(test): connection error: lost']);
});
