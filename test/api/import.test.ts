import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { IMPORT_CHUNK_SIZE, IMPORT_MAX_ROWS } from '../../src/api/services/cardImport.js';
import { carrierBody, createApiStack, iccid, type ApiStack, type ErrorAnswer } from './helpers.js';

interface ImportAnswer {
  readonly accepted: number;
  readonly rejected: { row: number; field: string; reason: string }[];
}

let api: ApiStack;
let carrierId: string;

before(async () => {
  api = await createApiStack('api-import');
  carrierId = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('bulk'))).body.id;
  await api.call('POST', '/v1/polling-configs', { name: 'bulk-intervals', intervalsSec: { card_status: 3600, carddata: 86_400 } });
});
after(async () => {
  await api.close();
});

const countCards = async (): Promise<number> => Number((await api.stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM iot_card')).rows[0]?.n);

test(`import of ${IMPORT_MAX_ROWS} cards: a chunk with a bad row is rejected whole with the row named, the rest lands`, async () => {
  const badRow = 2 * IMPORT_CHUNK_SIZE + 17;
  const rows = Array.from({ length: IMPORT_MAX_ROWS }, (_, i) => ({ iccid: iccid(1_000_000 + i), carrierId, status: 'active' }));
  rows[badRow] = { iccid: 'not-an-iccid', carrierId, status: 'active' };
  const before = await countCards();
  const started = Date.now();
  const { status, body } = await api.call<ImportAnswer>('POST', '/v1/cards/import', rows);
  const ms = Date.now() - started;
  console.log(`imported ${body.accepted} of ${IMPORT_MAX_ROWS} cards through the API in ${ms} ms`);
  assert.equal(status, 200);
  assert.equal(body.accepted, IMPORT_MAX_ROWS - IMPORT_CHUNK_SIZE);
  assert.equal(body.rejected.length, IMPORT_CHUNK_SIZE, 'every row of the sunk chunk is accounted for');
  const named = body.rejected.find((rejection) => rejection.row === badRow);
  assert.deepEqual(named && { row: named.row, field: named.field }, { row: badRow, field: 'iccid' });
  assert.match(named?.reason ?? '', /iccid/);
  const others = body.rejected.filter((rejection) => rejection.row !== badRow);
  assert.ok(others.every((rejection) => rejection.row >= 2 * IMPORT_CHUNK_SIZE && rejection.row < 3 * IMPORT_CHUNK_SIZE));
  assert.ok(others.every((rejection) => rejection.reason.includes(String(badRow))), 'the others name the row that sank the chunk');
  // Nothing of the bad chunk was written; everything else was.
  assert.equal((await countCards()) - before, IMPORT_MAX_ROWS - IMPORT_CHUNK_SIZE);
  const { rows: sunk } = await api.stack.db.pool.query('SELECT 1 FROM iot_card WHERE iccid = $1', [iccid(1_000_000 + badRow + 1)]);
  assert.equal(sunk.length, 0);
  // Polled cards are in their lane in Redis.
  const depths = await api.stack.deps.store.depths(carrierId);
  assert.equal(depths.normal, IMPORT_MAX_ROWS - IMPORT_CHUNK_SIZE);
});

test('import as NDJSON: unreadable lines, duplicates, references and existing ICCIDs reject their chunk only', async () => {
  const lines = [
    JSON.stringify({ iccid: iccid(1), carrierId }),
    JSON.stringify({ iccid: iccid(2), carrierId }),
    '',
    JSON.stringify({ iccid: iccid(3), carrierId }),
  ];
  const ok = await api.call<ImportAnswer>('POST', '/v1/cards/import', lines.join('\n'), { headers: { 'content-type': 'application/x-ndjson' } });
  assert.deepEqual(ok.body, { accepted: 3, rejected: [] });

  const bad = [
    '{"iccid": broken',
    JSON.stringify({ iccid: iccid(1), carrierId }),
    JSON.stringify({ iccid: iccid(4), carrierId: '999999' }),
    JSON.stringify({ iccid: iccid(5), carrierId }),
    JSON.stringify({ iccid: iccid(5), carrierId }),
    '[1, 2]',
  ].join('\n');
  const answer = await api.call<ImportAnswer>('POST', '/v1/cards/import', bad, { headers: { 'content-type': 'application/x-ndjson' } });
  assert.equal(answer.status, 200);
  assert.equal(answer.body.accepted, 0);
  assert.deepEqual(
    answer.body.rejected.map((rejection) => [rejection.row, rejection.field]),
    [[0, 'row'], [1, 'row'], [2, 'row'], [3, 'row'], [4, 'iccid'], [5, 'row']],
  );
  assert.match(answer.body.rejected[0]!.reason, /not JSON/);
  assert.match(answer.body.rejected[4]!.reason, /also appears in row 3/);
  assert.match(answer.body.rejected[5]!.reason, /JSON object/);

  // Shape is fine, references are not: checked against the database inside the chunk's transaction.
  const references = await api.call<ImportAnswer>('POST', '/v1/cards/import', [
    { iccid: iccid(6), carrierId },
    { iccid: iccid(1), carrierId },
    { iccid: iccid(7), carrierId: '999999' },
    { iccid: iccid(8), carrierId, deviceId: '999999' },
  ]);
  assert.equal(references.body.accepted, 0);
  assert.deepEqual(references.body.rejected.map((rejection) => [rejection.row, rejection.field]), [[0, 'row'], [1, 'iccid'], [2, 'carrierId'], [3, 'deviceId']]);
  assert.equal((await api.call('GET', `/v1/cards?carrierId=${carrierId}&limit=1`)).status, 200);
  const { rows } = await api.stack.db.pool.query('SELECT 1 FROM iot_card WHERE iccid = $1', [iccid(6)]);
  assert.equal(rows.length, 0, 'nothing of a rejected chunk is written');
});

test('import refuses bodies that are not a list of at most 50 000 rows', async () => {
  const object = await api.call<ErrorAnswer>('POST', '/v1/cards/import', { iccid: iccid(9), carrierId });
  assert.deepEqual([object.status, object.body.error.field], [400, 'body']);
  const tooMany = await api.call<ErrorAnswer>('POST', '/v1/cards/import', Array.from({ length: IMPORT_MAX_ROWS + 1 }, () => ({})));
  assert.deepEqual([tooMany.status, tooMany.body.error.field], [400, 'body']);
  const text = await api.call<ErrorAnswer>('POST', '/v1/cards/import', 'iccid,carrierId', { headers: { 'content-type': 'text/csv' } });
  assert.equal(text.status, 415);
  assert.equal((await api.call('POST', '/v1/cards/import', [], { token: 'wrong-token!' })).status, 401);
  // The 1 MiB limit of ordinary routes does not apply to the import.
  const big = await api.call('POST', '/v1/cards', { iccid: iccid(10), carrierId, msisdn: 'x'.repeat(2 * 1024 * 1024) });
  assert.equal(big.status, 413);
});
