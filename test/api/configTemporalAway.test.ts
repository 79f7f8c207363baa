/**
 * A polling config change commits, then is announced: the cards re-placed in Redis (a rebuild) and
 * every running scheduler told. With Temporal away the answer was a 503 after the commit, and the
 * rebuild was never requested (issue 46): the change sat in PostgreSQL while Redis polled by the
 * old one. Now the rebuild is requested first, and schedulers that cannot be told are logged.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { buildApiServer } from '../../src/api/server.js';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';

test('polling config change with Temporal away: 201, and the cards are re-placed in Redis', async () => {
  const stack = await createStack('api-cfg-away');
  // A server nobody listens on: every Temporal call fails.
  const connection = Connection.lazy({ address: '127.0.0.1:1' });
  const client = new Client({ connection, namespace: stack.config.TEMPORAL_NAMESPACE });
  const app = await buildApiServer(
    {
      config: stack.config,
      deps: stack.deps,
      services: stack.services,
      orchestration: { client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
    },
    { logLevel: 'silent' },
  );
  try {
    const account = await seedAccount(stack, {
      name: 'away1',
      qps: { main: 5 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 3,
      intervalsSec: { card_status: 600 },
    });
    const card = account.cards[0];
    assert.ok(card !== undefined);
    const dueKey = stack.deps.store.keys(account.carrier.id).due(card.id);
    assert.equal(await stack.deps.redis.hget(dueKey, 'due:carddata'), null, 'carddata is not polled yet');
    const answer = await app.inject({
      method: 'POST',
      url: '/v1/polling-configs',
      headers: { authorization: `Bearer ${stack.config.API_TOKEN}` },
      payload: { name: 'carddata-too', priority: 20, match: { carrierId: account.carrier.id }, intervalsSec: { card_status: 600, carddata: 900 } },
    });
    assert.equal(answer.statusCode, 201, answer.body);
    await waitFor('the card placed for carddata', async () => (await stack.deps.redis.hget(dueKey, 'due:carddata')) !== null, 30_000);
  } finally {
    await app.close();
    await connection.close().catch(() => undefined);
    await stack.close();
  }
});
