/**
 * The dashboard's routes on a real API server (inject): the page loads without a token, its data
 * routes need one, the card search finds cards by ICCID and id, the history samples real status.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack, type ErrorAnswer } from '../api/helpers.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import type { History } from '../../src/dashboard/sampler.js';
import type { CardLookup } from '../../src/dashboard/cardLookup.js';

test('dashboard routes: public page, token-protected data, card search, history', async () => {
  const api = await createApiStack('dash-routes');
  try {
    const { carrier, cards } = await seedAccount(api.stack, {
      name: 'dr1',
      qps: { main: 5 },
      typeGroups: { card_status: 'main' },
      cards: 3,
      intervalsSec: { card_status: 60 },
    });
    const card = cards[1]!;

    // The page and its modules load without a token; `/` leads to it.
    const root = await api.call('GET', '/', undefined, { token: null });
    assert.equal(root.status, 302);
    assert.equal(root.headers.location, '/dashboard');
    const page = await api.call<string>('GET', '/dashboard', undefined, { token: null });
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    assert.match(page.body, /<script type="module" src="\/dashboard\/app\.js">/);
    assert.ok(!page.body.includes(api.stack.config.API_TOKEN), 'the page holds no token');
    for (const file of ['app.js', 'api.js', 'charts.js', 'dom.js', 'cardPanel.js']) {
      const script = await api.call<string>('GET', `/dashboard/${file}`, undefined, { token: null });
      assert.equal(script.status, 200, file);
      assert.match(String(script.headers['content-type']), /^text\/javascript/, file);
    }
    assert.equal((await api.call('GET', '/dashboard/app.css', undefined, { token: null })).status, 200);

    // Its data needs the token, like every /v1 route.
    assert.equal((await api.call('GET', '/dashboard/api/history', undefined, { token: null })).status, 401);
    assert.equal((await api.call('GET', `/dashboard/api/cards/lookup?q=${card.iccid}`, undefined, { token: 'wrong-token-value' })).status, 401);
    assert.equal((await api.call('GET', '/v1/carriers', undefined, { token: null })).status, 401);

    // Card search: by ICCID, by id, and a clear 404.
    const byIccid = await api.call<CardLookup>('GET', `/dashboard/api/cards/lookup?q=${card.iccid}`);
    assert.equal(byIccid.status, 200, JSON.stringify(byIccid.body));
    const workflowId = `${api.stack.config.WORKFLOW_ID_PREFIX}card-${card.id}`;
    assert.deepEqual(byIccid.body, {
      cardId: card.id,
      iccid: card.iccid,
      carrierId: carrier.id,
      workflowId,
      workflowsUrl:
        `${api.stack.config.TEMPORAL_UI_URL.replace(/\/+$/, '')}/namespaces/${api.stack.config.TEMPORAL_NAMESPACE}` +
        `/workflows?query=${encodeURIComponent(`WorkflowId="${workflowId}"`)}`,
      workflowsQuery: `WorkflowId="${workflowId}"`,
      runUrlPrefix: `${api.stack.config.TEMPORAL_UI_URL.replace(/\/+$/, '')}/namespaces/${api.stack.config.TEMPORAL_NAMESPACE}/workflows/${workflowId}/`,
    });
    const byId = await api.call<CardLookup>('GET', `/dashboard/api/cards/lookup?q=%20${card.id}%20`);
    assert.equal(byId.body.iccid, card.iccid);
    const missing = await api.call<ErrorAnswer>('GET', '/dashboard/api/cards/lookup?q=89860000999999999999');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.field, 'q');
    assert.equal((await api.call('GET', '/dashboard/api/cards/lookup?q=')).status, 400);

    // History: the first request starts sampling with an immediate round of the real status.
    const history = await waitFor(
      'a first status sample',
      async () => {
        const answer = await api.call<History>('GET', '/dashboard/api/history');
        return (answer.body.carriers[carrier.id]?.length ?? 0) > 0 ? answer.body : undefined;
      },
      10_000,
      100,
    );
    assert.equal(history.windowMs, 15 * 60_000);
    const [first] = history.carriers[carrier.id]!;
    assert.deepEqual(
      first!.groups.map((group) => [group.name, group.configured]),
      [['main', 5]],
    );
    // Three polled cards wait in the normal lane: the sample carries the status' lanes.
    assert.equal(first!.normal, 3);
    const later = await api.call<History>('GET', `/dashboard/api/history?since=${first!.t}`);
    assert.ok((later.body.carriers[carrier.id] ?? []).every((sample) => sample.t > first!.t));
  } finally {
    await api.close();
  }
});
