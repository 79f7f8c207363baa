/** The ingest mode and status through the API (GET/PUT /v1/mode/ingest): switch at run time, audited. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack } from '../api/helpers.js';
import { IngestStream } from '../../src/ingest/stream.js';

interface IngestModeAnswer {
  mode: string;
  updatedBy: string;
  backlog: { records: number; oldestPendingAgeMs: number };
  writeRatePerSec: number;
  tightened: boolean;
  deadLetters: number;
}

test('ingest mode: read with the backlog, switched sync → async → sync, each switch audited', async () => {
  const api = await createApiStack('ingest-api');
  try {
    const initial = await api.call<IngestModeAnswer>('GET', '/v1/mode/ingest');
    assert.equal(initial.status, 200);
    assert.equal(initial.body.mode, 'sync');
    assert.deepEqual(initial.body.backlog, { records: 0, oldestPendingAgeMs: 0 });
    assert.equal(initial.body.tightened, false);

    // Two records waiting: the status shows them.
    const stream = new IngestStream(api.stack.deps.redis, api.stack.redis.namespace);
    await stream.enqueue('{}');
    await stream.enqueue('{}');
    const pending = await api.call<IngestModeAnswer>('GET', '/v1/mode/ingest');
    assert.equal(pending.body.backlog.records, 2);

    const toAsync = await api.call('PUT', '/v1/mode/ingest', { mode: 'async' });
    assert.deepEqual(toAsync.body, { mode: 'async', changed: true });
    assert.deepEqual((await api.call('PUT', '/v1/mode/ingest', { mode: 'async' })).body, { mode: 'async', changed: false });
    assert.equal(await api.stack.deps.reference.ingestMode(), 'async', 'the process reads the new mode at once');
    assert.equal((await api.call<IngestModeAnswer>('GET', '/v1/mode/ingest')).body.updatedBy, 'api');
    assert.deepEqual((await api.call('PUT', '/v1/mode/ingest', { mode: 'sync' })).body, { mode: 'sync', changed: true });
    assert.equal((await api.call('PUT', '/v1/mode/ingest', { mode: 'later' })).status, 400);

    const { rows } = await api.stack.db.pool.query<{ before: { mode: string }; after: { mode: string } }>(
      "SELECT before, after FROM audit_log WHERE entity_id = 'polling.ingest.mode' ORDER BY occurred_at, id",
    );
    assert.deepEqual(
      rows.map((r) => `${r.before.mode}→${r.after.mode}`),
      ['sync→async', 'async→sync'],
    );
  } finally {
    await api.close();
  }
});
