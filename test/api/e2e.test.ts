/**
 * End to end through the API only (plus the simulator's own settings): accounts, configs and cards
 * are created over HTTP, the orchestration runs on real workers, and checks, request-checks, the
 * mode switch, the account status and alerts are all observed over HTTP.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { waitFor } from '../../testkit/seed.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { HistoryView } from '../replay/paths.js';
import { carrierBody, createApiStack, iccid } from './helpers.js';

interface Detail {
  readonly id: string;
  readonly failures: Record<string, { count: number; lastError?: string }>;
  readonly alerts: { type: string }[];
  readonly executions: { startedAt: string; types: string[]; outcome: string; workflowId: string; runId: string; fromPriority?: boolean }[];
}

test('e2e over the API: checks flow, request-check, status, alerts, mode switch', async () => {
  const api = await createApiStack('api-e2e');
  try {
    const typeGroups = { card_status: 'main', carddata: 'main' };
    const healthy = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('e2e-ok', { typeGroups }))).body;
    const failing = (
      await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('e2e-bad', { typeGroups, failureAlertThreshold: 1, backoffBaseMs: 500 }))
    ).body;
    // The simulator plays the carriers: one healthy, one failing every call.
    await api.stack.simulator.updateAccount('e2e-ok-gw', { groups: { main: 20 }, typeGroups, latencyMs: { p50: 5, p99: 20 }, errorRate: 0 });
    await api.stack.simulator.updateAccount('e2e-bad-gw', { groups: { main: 20 }, typeGroups, latencyMs: { p50: 5, p99: 20 }, errorRate: 1 });
    assert.equal((await api.call('POST', '/v1/polling-configs', { name: 'e2e', intervalsSec: { card_status: 3, carddata: 6 } })).status, 201);
    const imported = await api.call<{ accepted: number }>(
      'POST',
      '/v1/cards/import',
      Array.from({ length: 5 }, (_, i) => ({ iccid: iccid(i, '8931'), carrierId: healthy.id })),
    );
    assert.equal(imported.body.accepted, 5);
    const bad = (await api.call<{ id: string }>('POST', '/v1/cards', { iccid: iccid(99, '8931'), carrierId: failing.id })).body;
    const cards = (await api.call<{ items: { id: string }[] }>('GET', `/v1/cards?carrierId=${healthy.id}`)).body.items;
    const card = cards[0]!;

    const workers = await api.stack.startWorkers();
    await ensurePollingControl(api.ref, { reconcileEveryMs: 2000 });

    // Checks flow: the card detail shows executions, newest first.
    const detail = await waitFor(
      'two executions of the card',
      async () => {
        const answer = await api.call<Detail>('GET', `/v1/cards/${card.id}`);
        return answer.body.executions.length >= 2 ? answer.body : undefined;
      },
      30_000,
    );
    assert.equal(detail.executions[0]!.outcome, 'success');
    assert.ok(Date.parse(detail.executions[0]!.startedAt) >= Date.parse(detail.executions[1]!.startedAt), 'newest first');
    assert.match(detail.executions[0]!.workflowId, new RegExp(`card-${card.id}$`));

    // Request-check: served by the API. A workflow loop is woken by its priorityRequested update (no
    // requestCheck update); a claim loop activity looks at the priority lane every tick and needs none.
    const requested = await api.call('POST', `/v1/cards/${card.id}/request-check`, { types: ['carddata'], lane: 'priority' });
    assert.equal(requested.status, 200, JSON.stringify(requested.body));
    assert.deepEqual(requested.body, { status: 'requested', requested: 1, types: { carddata: 'requested' } });
    const schedulerHistory = async (): Promise<HistoryView> =>
      new HistoryView(await api.stack.client.workflow.getHandle(schedulerWorkflowId(healthy.id, api.ref.workflowIdPrefix)).fetchHistory());
    if (api.stack.config.SCHEDULER_LOOP === 'workflow') {
      const woken = await waitFor(
        'the scheduler woken',
        async () => {
          const history = await schedulerHistory();
          return history.updatesAccepted().length > 0 ? history : undefined;
        },
        10_000,
      );
      assert.deepEqual(woken.updatesAccepted(), ['priorityRequested']);
    }
    await waitFor(
      'an execution from the priority lane',
      async () => {
        const answer = await api.call<Detail>('GET', `/v1/cards/${card.id}`);
        return answer.body.executions.some((execution) => execution.fromPriority === true) || undefined;
      },
      20_000,
    );
    if (api.stack.config.SCHEDULER_LOOP === 'activity') assert.deepEqual((await schedulerHistory()).updatesAccepted(), [], 'no update reached the scheduler');
    const cooled = await api.call('POST', `/v1/cards/${card.id}/request-check`, { types: ['card_status'], cooldownMs: 3_600_000 });
    assert.deepEqual(cooled.body, { status: 'cooldown', requested: 0, types: { card_status: 'cooldown' } });
    await api.call('PATCH', `/v1/cards/${cards[1]!.id}`, { enablePolling: false });
    const notPolled = await api.call('POST', `/v1/cards/${cards[1]!.id}/request-check`, { types: ['card_status'] });
    assert.deepEqual(notPolled.body, { status: 'not_polled', requested: 0, types: { card_status: 'not_polled' } });

    // Account status while running.
    const status = await api.call<{
      mode: string;
      groups: { name: string; qpsConfigured: number; qpsEffective: number }[];
      latenessMs: { p50: number; p99: number };
      lanes: { normal: number; priority: number };
      capacity: { requiredQps: Record<string, number> };
    }>('GET', `/v1/carriers/${healthy.id}/status`);
    assert.equal(status.status, 200);
    assert.equal(status.body.mode, 'carrier');
    assert.deepEqual(
      status.body.groups.map((group) => [group.name, group.qpsConfigured, group.qpsEffective]),
      [['main', 20, 20]],
    );
    assert.ok(status.body.latenessMs.p99 >= status.body.latenessMs.p50);
    assert.equal(status.body.lanes.normal + status.body.lanes.priority, 4, 'the disabled card left its lane');
    // 4 polled cards × (1/3 + 1/6).
    assert.equal(status.body.capacity.requiredQps.main, 2);

    // Failures raise alerts, visible in the list and the card detail, and can be acknowledged.
    const alerts = await waitFor(
      'a failure alert on the failing account',
      async () => {
        const answer = await api.call<{ items: { id: string; kind: string; cardId?: string }[] }>('GET', `/v1/alerts?carrierId=${failing.id}&kind=failure`);
        return answer.body.items.length > 0 ? answer.body.items : undefined;
      },
      30_000,
    );
    assert.equal(alerts[0]!.cardId, bad.id);
    const badDetail = (await api.call<Detail>('GET', `/v1/cards/${bad.id}`)).body;
    assert.ok(badDetail.alerts.length > 0);
    assert.ok(
      Object.values(badDetail.failures).some((failure) => failure.count >= 1 && (failure.lastError ?? '').startsWith('transient')),
      JSON.stringify(badDetail.failures),
    );
    const acked = await api.call('POST', `/v1/alerts/${alerts[0]!.id}/ack`);
    assert.equal(acked.status, 200);
    assert.ok(acked.body.ackedAt);

    // Mode switch through pollingControl, persisted and visible.
    const legacy = await api.call('PUT', '/v1/mode', { mode: 'legacy' });
    assert.deepEqual(legacy.body, { mode: 'legacy', changed: true });
    assert.equal((await api.call('GET', '/v1/mode')).body.mode, 'legacy');
    assert.equal((await api.call('GET', `/v1/carriers/${healthy.id}/status`)).body.mode, 'legacy');
    const again = await api.call('PUT', '/v1/mode', { mode: 'legacy' });
    assert.deepEqual(again.body, { mode: 'legacy', changed: false });
    const back = await api.call('PUT', '/v1/mode', { mode: 'carrier' });
    assert.deepEqual(back.body, { mode: 'carrier', changed: true });
    assert.equal((await api.call('GET', '/v1/mode')).body.mode, 'carrier');

    // A carrier change reaches the running scheduler (configChanged) without error.
    assert.equal((await api.call('PATCH', `/v1/carriers/${healthy.id}`, { inflightLimit: 10 })).status, 200);
    const health = await api.call('GET', '/readyz', undefined, { token: null });
    assert.equal(health.status, 200);
    await workers.stop();
  } finally {
    await api.close();
  }
});
