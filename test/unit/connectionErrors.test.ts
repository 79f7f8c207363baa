/**
 * The rate-limited connection error log (src/runtime/connectionErrors.ts): pure logic, fake clock,
 * its lines read back from the logger it writes through.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ConnectionErrorLog, describeConnectionError, logConnectionErrors } from '../../src/runtime/connectionErrors.js';
import { captureLogs, type LogLine } from '../../testkit/logs.js';

function fixture(): { log: ConnectionErrorLog; lines: () => LogLine[]; advance: (ms: number) => void } {
  let now = 1_000_000;
  const logs = captureLogs();
  const log = new ConnectionErrorLog('redis(test)', { everyMs: 10_000, logger: logs.logger, now: () => now });
  return { log, lines: () => logs.lines(), advance: (ms) => void (now += ms) };
}

const messages = (lines: LogLine[]): string[] => lines.map((line) => line.msg);

test('connection errors: the first is written at once, the rest at most once per interval with a count', () => {
  const { log, lines, advance } = fixture();
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
  log.error(refused);
  for (let i = 0; i < 5; i++) {
    advance(1000);
    log.error(refused);
  }
  assert.deepEqual(lines(), [
    {
      level: 'error',
      connection: 'redis(test)',
      error: 'connect ECONNREFUSED 127.0.0.1:6379',
      unreported: 0,
      msg: 'redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379',
    },
  ]);
  advance(5000);
  log.error(refused);
  assert.equal(messages(lines())[1], 'redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379 (5 more errors not shown)');
  assert.equal(lines()[1]?.unreported, 5);
  advance(1000);
  log.error(refused);
  log.recovered();
  assert.deepEqual(lines()[2], { level: 'info', connection: 'redis(test)', unreported: 1, msg: 'redis(test): connected again (1 more error not shown)' });
  // Recovery is written once, and the next outage's first error is written at once.
  log.recovered();
  log.error(refused);
  assert.equal(lines().length, 4);
  assert.equal(messages(lines())[3], 'redis(test): connection error: connect ECONNREFUSED 127.0.0.1:6379');
});

test('connection errors: recovery without a preceding error writes nothing', () => {
  const { log, lines } = fixture();
  log.recovered();
  assert.deepEqual(lines(), []);
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
  const logs = captureLogs();
  logConnectionErrors(emitter, 'postgres(test)', { logger: logs.logger });
  emitter.emit('error', new Error('lost'));
  assert.deepEqual(messages(logs.lines()), ['postgres(test): connection error: lost']);
});
