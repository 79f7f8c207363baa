import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planFinish, overallOutcome, encodeFinishRecord, decodeFinishRecord, FinishRecordError } from '../../src/domain/finishPlan.js';
import { parseDueHash } from '../../src/redis/dueState.js';
import type { StepResult } from '../../src/workflow-safe/cardRun.js';
import { parseIngestRecord } from '../../src/ingest/record.js';

const now = 1_000_000;
const half = (): number => 0.5;

function state(fields: Record<string, string>) {
  return parseDueHash({ carrier: '1', ...fields });
}

test('success: clears the streak, records ok, next due one interval after the previous due', () => {
  const plan = planFinish({
    state: state({ 'due:card_status': String(now - 2_000), 'fail:card_status': '2', 'ffail:card_status': '1', 'err:card_status': 'transient|x' }),
    results: [{ type: 'card_status', outcome: 'success', gatewayMs: 3, observation: { collectionId: 'c', observedAt: 'x', payload: { network: 'online' } } }],
    intervalsMs: { card_status: 60_000 },
    backoffBaseMs: 1_000,
    now,
    random: half,
  });
  assert.equal(plan.set['due:card_status'], now - 2_000 + 60_000);
  assert.equal(plan.set['ok:card_status'], now);
  assert.ok(plan.del.includes('fail:card_status') && plan.del.includes('err:card_status') && plan.del.includes('ffail:card_status'));
  assert.equal(plan.types[0]?.failBefore, 2);
  assert.equal(plan.types[0]?.failAfter, 0);
  assert.equal(plan.outcome, 'success');
});

test('failure: increments the streak, sets first failure once, backs off from the base', () => {
  const first = planFinish({
    state: state({ 'due:carddata': String(now) }),
    results: [{ type: 'carddata', outcome: 'failure', errorClass: 'permanent', message: 'bad iccid', gatewayMs: 2 }],
    intervalsMs: { carddata: 600_000 },
    backoffBaseMs: 10_000,
    now,
    random: () => 1,
  });
  assert.equal(first.set['fail:carddata'], 1);
  assert.equal(first.set['ffail:carddata'], now);
  assert.equal(first.types[0]?.firstFailedAt, now);
  assert.equal(first.set['err:carddata'], 'permanent|bad iccid');
  assert.equal(first.set['due:carddata'], now + 10_000);
  const third = planFinish({
    state: state({ 'due:carddata': String(now), 'fail:carddata': '2', 'ffail:carddata': '5' }),
    results: [{ type: 'carddata', outcome: 'failure', errorClass: 'transient', message: 'm', gatewayMs: 2 }],
    intervalsMs: { carddata: 600_000 },
    backoffBaseMs: 10_000,
    now,
    random: () => 1,
  });
  assert.equal(third.set['fail:carddata'], 3);
  assert.equal(third.set['ffail:carddata'], undefined, 'first failure of the streak is kept');
  assert.equal(third.types[0]?.firstFailedAt, 5, "and handed to the records (the alert's first_failed_at)");
  assert.equal(third.set['due:carddata'], now + 40_000);
});

test('deferral counts nothing and is due again within two seconds', () => {
  const plan = planFinish({
    state: state({ 'due:realname': String(now), 'fail:realname': '1' }),
    results: [{ type: 'realname', outcome: 'deferred', reason: 'rate_limit_wait', gatewayMs: 900 }],
    intervalsMs: { realname: 60_000 },
    backoffBaseMs: 1_000,
    now,
    random: half,
  });
  assert.equal(plan.set['fail:realname'], undefined);
  const due = Number(plan.set['due:realname']);
  assert.ok(due > now && due <= now + 2_000, `due ${due}`);
  assert.equal(plan.outcome, 'deferred');
});

test('confirmation: not yet seen → next delay; seen → cleared and back to the interval; exhausted → recorded', () => {
  const base = { 'due:card_status': String(now), 'cfm:card_status': '10,30', 'exp:card_status': 'offline' };
  const online: StepResult = {
    type: 'card_status',
    outcome: 'success',
    gatewayMs: 1,
    observation: { collectionId: 'c', observedAt: 'x', payload: { network: 'online' } },
  };
  const offline: StepResult = { ...online, observation: { collectionId: 'd', observedAt: 'x', payload: { network: 'offline' } } };
  const again = planFinish({ state: state(base), results: [online], intervalsMs: { card_status: 60_000 }, backoffBaseMs: 1, now, random: half });
  assert.equal(again.set['due:card_status'], now + 10_000);
  assert.equal(again.set['cfm:card_status'], '30');
  const seen = planFinish({ state: state(base), results: [offline], intervalsMs: { card_status: 60_000 }, backoffBaseMs: 1, now, random: half });
  assert.ok(seen.del.includes('cfm:card_status') && seen.del.includes('exp:card_status'));
  assert.equal(seen.set['due:card_status'], now + 60_000);
  assert.equal(seen.types[0]?.confirmed, true);
  const last = planFinish({
    state: state({ 'due:card_status': String(now), 'exp:card_status': 'offline' }),
    results: [online],
    intervalsMs: { card_status: 60_000 },
    backoffBaseMs: 1,
    now,
    random: half,
  });
  assert.equal(last.types[0]?.confirmationMissed, true);
  assert.ok(last.del.includes('exp:card_status'));
});

test('a due left for a type the plan does not poll (config changed, rebuild not there yet) is deleted with its request', () => {
  // Production's path: the execution runs only the types its intervals poll, so the stray type is
  // in the hash, not in the results.
  const plan = planFinish({
    state: state({ 'due:card_status': String(now), 'due:carddata': String(now - 5), 'req:carddata': String(now - 9) }),
    results: [{ type: 'card_status', outcome: 'success', gatewayMs: 1 }],
    intervalsMs: { card_status: 60_000 },
    backoffBaseMs: 1,
    now,
    random: half,
  });
  assert.deepEqual(
    plan.del.filter((field) => field.endsWith(':carddata')),
    ['due:carddata', 'req:carddata'],
  );
  assert.equal(plan.set['due:card_status'], now + 60_000);
  assert.equal(plan.set['due:carddata'], undefined);
  // Types without a due in the hash are not mentioned at all.
  assert.ok(!plan.del.some((field) => field.endsWith(':realname') || field.endsWith(':package')));
});

test('a result for a type the plan does not poll writes no due, and deletes it', () => {
  const plan = planFinish({
    state: state({ 'due:carddata': String(now) }),
    results: [{ type: 'carddata', outcome: 'success', gatewayMs: 1 }],
    intervalsMs: {},
    backoffBaseMs: 1,
    now,
    random: half,
  });
  assert.ok(plan.del.includes('due:carddata'));
  assert.equal(plan.set['due:carddata'], undefined);
});

test('overall outcome', () => {
  assert.equal(
    overallOutcome([
      { type: 'carddata', outcome: 'success', gatewayMs: 1 },
      { type: 'realname', outcome: 'failure', errorClass: 'x', message: '', gatewayMs: 1 },
    ]),
    'partial',
  );
  assert.equal(overallOutcome([{ type: 'carddata', outcome: 'failure', errorClass: 'x', message: '', gatewayMs: 1 }]), 'failure');
  assert.equal(overallOutcome([{ type: 'carddata', outcome: 'skipped', reason: 'total_timeout' }]), 'deferred');
});

test('finish record: what a retried finish replays round-trips exactly, compactly', () => {
  const plan = planFinish({
    state: state({
      'due:card_status': String(now),
      'fail:card_status': '2',
      'cfm:card_status': '10',
      'exp:card_status': 'offline',
      'due:carddata': String(now),
    }),
    results: [
      { type: 'card_status', outcome: 'success', gatewayMs: 3, observation: { collectionId: 'c', observedAt: 'x', payload: { network: 'offline' } } },
      { type: 'carddata', outcome: 'failure', errorClass: 'transient', message: 'm', gatewayMs: 2 },
    ],
    intervalsMs: { card_status: 60_000, carddata: 60_000 },
    backoffBaseMs: 1_000,
    now,
    random: half,
  });
  const evaluated: StepResult = {
    type: 'package',
    outcome: 'success',
    gatewayMs: 0,
    observation: { collectionId: 'package-1-5', observedAt: 'y', payload: { state: 'ok', usagePct: null } },
  };
  const record = { outcome: plan.outcome, types: plan.types, evaluated };
  assert.equal(plan.types[0]?.confirmed, true);
  const encoded = encodeFinishRecord(record);
  assert.deepEqual(decodeFinishRecord(encoded), record);
  assert.deepEqual(decodeFinishRecord(encodeFinishRecord({ outcome: 'deferred', types: [] })), { outcome: 'deferred', types: [] });
  assert.ok(encoded.length < 300, `${encoded.length} bytes: ${encoded}`);
  assert.equal(plan.types[1]?.firstFailedAt, now);
  assert.equal(decodeFinishRecord('{"o":"failure","t":[["carddata","failure",0,1,5,0,null]]}').types[0]?.firstFailedAt, null);
  for (const bad of [
    '',
    '{',
    '{"o":"nope","t":[]}',
    '{"o":"success","t":[["card_status","success",0,0,1]]}',
    '{"o":"failure","t":[["carddata","failure",0,1,5,0]]}',
    '{"o":"success","t":[],"p":{"type":"x"}}',
  ])
    assert.throws(() => decodeFinishRecord(bad), FinishRecordError, bad);
});

test('an ingest stream entry reads back as its record; one without typeFinishes is refused (dead-lettered)', () => {
  const types = planFinish({
    state: state({ 'due:carddata': String(now), 'fail:carddata': '1', 'ffail:carddata': String(now - 5_000) }),
    results: [{ type: 'carddata', outcome: 'failure', errorClass: 'transient', message: 'm', gatewayMs: 2 }],
    intervalsMs: { carddata: 60_000 },
    backoffBaseMs: 1_000,
    now,
    random: half,
  }).types;
  const base = {
    recordId: 'card-1/run-1',
    carrierId: '1',
    cardId: '1',
    token: 'tok',
    plan: { kind: 'run', types: ['carddata'] },
    results: [{ type: 'carddata', outcome: 'failure', errorClass: 'transient', message: 'm', gatewayMs: 2 }],
    startedAt: now - 50,
    fromPriority: false,
    workflowId: 'card-1',
    runId: 'run-1',
    outcome: 'failure',
    owned: true,
    finishedAt: now,
  };
  assert.deepEqual(parseIngestRecord(JSON.stringify({ ...base, typeFinishes: types })).typeFinishes, types);
  assert.throws(() => parseIngestRecord(JSON.stringify(base)), TypeError);
});
