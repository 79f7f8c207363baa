// @ts-check
/**
 * The dashboard page: asks for the API token once, then polls the API's /v1 routes every two seconds for
 * a row per carrier account, and the dashboard's history route for the 15-minute charts.
 */
import { ApiError, Unauthorized, call, forgetToken, storeToken, storedToken } from './api.js';
import { initCardPanel } from './cardPanel.js';
import { lineChart } from './charts.js';
import { byId, duration, h, num, time } from './dom.js';

const REFRESH_MS = 2000;
const MIN_CHART_SPAN_MS = 60_000;
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];

/**
 * @typedef {{ id: string, name: string, gatewayAccount: string, enabled: boolean, inflightLimit: number }} Carrier
 * @typedef {{ name: string, qpsConfigured: number, qpsEffective: number, usedLastSecond: number }} GroupStatus
 * @typedef {{ inflightLimit: number, startsPerSec: number, startLagMs: number, capacityPerSec: number | null }} Orchestration
 * @typedef {{ carrierId: string, mode: string, paused: boolean, inflight: number, lanes: { priority: number, normal: number },
 *   dueNow: number, groups: GroupStatus[], latenessMs: { p50: number, p99: number }, expiredLeases: number,
 *   capacity: { requiredQps: Record<string, number>, budgetQps: Record<string, number>, requiredExecutionsPerSec: number, stretchFactor: number },
 *   limitedBy: string, orchestration?: Orchestration, schedulerRunning: boolean,
 *   staleness?: Record<string, { changes: number, p50Ms: number, p99Ms: number, maxMs: number }> }} Status
 * @typedef {{ name: string, used: number, effective: number, configured: number }} GroupSample
 * @typedef {{ t: number, callsPerSec: number, groups: GroupSample[], latenessP50: number, latenessP99: number,
 *   inflight: number, priority: number, normal: number, dueNow: number, stretchFactor: number }} Sample
 * @typedef {{ sampleEveryMs: number, windowMs: number, carriers: Record<string, Sample[]> }} History
 * @typedef {{ carrier: Carrier, status?: Status, statusError?: string, openAlerts?: number, moreAlerts?: boolean }} AccountView
 */

/** Samples per account, oldest first, kept for the charts' window. */
const history = {
  /** @type {Map<string, Sample[]>} */
  samples: new Map(),
  sampleEveryMs: 5000,
  windowMs: 15 * 60_000,
  /** @type {number | undefined} */
  lastT: undefined,
  /** Wall time of the last fetch, to ask no more often than the server samples. */
  fetchedAt: 0,
};

let currentMode = '';
/** Bumped by every mode switch: a refresh that read the mode before the switch must not show it. */
let modeVersion = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;

async function fetchHistory() {
  const now = Date.now();
  if (now - history.fetchedAt < Math.min(history.sampleEveryMs, REFRESH_MS * 2)) return;
  history.fetchedAt = now;
  const answer = /** @type {History} */ (await call('GET', `/dashboard/api/history${history.lastT === undefined ? '' : `?since=${history.lastT}`}`));
  history.sampleEveryMs = answer.sampleEveryMs;
  history.windowMs = answer.windowMs;
  const horizon = now - answer.windowMs;
  for (const [carrierId, samples] of Object.entries(answer.carriers)) {
    const kept = (history.samples.get(carrierId) ?? []).concat(samples).filter((sample) => sample.t >= horizon);
    history.samples.set(carrierId, kept);
    for (const sample of samples) history.lastT = Math.max(history.lastT ?? 0, sample.t);
  }
}

/**
 * @param {Carrier} carrier
 * @returns {Promise<AccountView>}
 */
async function accountView(carrier) {
  const [status, alerts] = await Promise.allSettled([
    call('GET', `/v1/carriers/${carrier.id}/status`),
    call('GET', `/v1/alerts?status=open&carrierId=${carrier.id}&limit=100`),
  ]);
  for (const result of [status, alerts]) if (result.status === 'rejected' && result.reason instanceof Unauthorized) throw result.reason;
  const alertPage = /** @type {{ items: unknown[], nextCursor?: string } | undefined} */ (alerts.status === 'fulfilled' ? alerts.value : undefined);
  return {
    carrier,
    ...(status.status === 'fulfilled'
      ? { status: /** @type {Status} */ (status.value) }
      : { statusError: String(status.reason instanceof Error ? status.reason.message : status.reason) }),
    ...(alertPage === undefined ? {} : { openAlerts: alertPage.items.length, moreAlerts: alertPage.nextCursor !== undefined }),
  };
}

/**
 * @param {string} carrierId
 * @param {Status | undefined} status
 */
function chartsOf(carrierId, status) {
  const samples = history.samples.get(carrierId) ?? [];
  const now = Date.now();
  // A young history fills the chart instead of a sliver at its right edge; at most the window.
  const span = Math.min(history.windowMs, Math.max(MIN_CHART_SPAN_MS, now - (samples[0]?.t ?? now)));
  const common = { now, windowMs: span, gapMs: history.sampleEveryMs * 3 };
  const groupNames = status?.groups.map((group) => group.name) ?? [...new Set(samples.flatMap((sample) => sample.groups.map((group) => group.name)))];
  /**
   * @param {string} name
   * @param {'used' | 'effective'} key
   * @returns {[number, number][]}
   */
  const groupPoints = (name, key) =>
    samples.flatMap((sample) => sample.groups.filter((group) => group.name === name).map((group) => /** @type {[number, number]} */ ([sample.t, group[key]])));
  /**
   * @param {(sample: Sample) => number} pick
   * @returns {[number, number][]}
   */
  const points = (pick) => samples.map((sample) => [sample.t, pick(sample)]);
  return h(
    'div',
    { class: 'charts' },
    lineChart({
      ...common,
      field: 'budget',
      title: 'Calls/s per group (dashed: effective rate)',
      series: groupNames.flatMap((name, i) => [
        { label: `${name} used`, color: COLORS[i % COLORS.length] ?? '#000', points: groupPoints(name, 'used') },
        { label: `${name} rate`, color: COLORS[i % COLORS.length] ?? '#000', points: groupPoints(name, 'effective'), dashed: true },
      ]),
    }),
    lineChart({
      ...common,
      field: 'lateness',
      title: 'Lateness (start − due)',
      format: duration,
      series: [
        { label: 'p50', color: COLORS[0] ?? '#000', points: points((sample) => sample.latenessP50) },
        { label: 'p99', color: COLORS[1] ?? '#000', points: points((sample) => sample.latenessP99) },
      ],
    }),
    lineChart({
      ...common,
      field: 'queues',
      title: 'Lanes, due now, in-flight',
      series: [
        { label: 'priority', color: COLORS[1] ?? '#000', points: points((sample) => sample.priority) },
        { label: 'normal', color: COLORS[0] ?? '#000', points: points((sample) => sample.normal) },
        { label: 'due now', color: COLORS[4] ?? '#000', points: points((sample) => sample.dueNow) },
        { label: 'in-flight', color: COLORS[2] ?? '#000', points: points((sample) => sample.inflight) },
      ],
    }),
  );
}

/**
 * @param {Status} status
 */
function groupTable(status) {
  return h(
    'table',
    { class: 'groups' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'group'),
        h('th', {}, 'budget use'),
        h('th', {}, 'used/s'),
        h('th', {}, 'effective'),
        h('th', {}, 'configured'),
        h('th', {}, 'needed'),
      ),
    ),
    h(
      'tbody',
      {},
      status.groups.map((group) => {
        const share = group.qpsEffective > 0 ? group.usedLastSecond / group.qpsEffective : 0;
        const fill = h('span', { class: share > 1 ? 'meter-fill over' : 'meter-fill' });
        fill.style.width = `${Math.min(100, Math.round(share * 100))}%`;
        return h(
          'tr',
          { 'data-group': group.name },
          h('td', {}, group.name),
          h('td', {}, h('span', { class: 'meter', title: `${Math.round(share * 100)} % of the effective rate` }, fill)),
          h('td', { class: 'num', 'data-field': 'used' }, num(group.usedLastSecond)),
          h('td', { class: 'num', 'data-field': 'effective' }, num(group.qpsEffective)),
          h('td', { class: 'num', 'data-field': 'configured' }, num(group.qpsConfigured)),
          h('td', { class: 'num', 'data-field': 'needed' }, num(status.capacity.requiredQps[group.name])),
        );
      }),
    ),
  );
}

/**
 * Staleness per type over the last hour (`card_status 2 s / 41 s`), or a dash when the carrier
 * dated no change in it.
 * @param {Status} status
 * @returns {string}
 */
function stalenessText(status) {
  const types = Object.entries(status.staleness ?? {}).filter(([, figures]) => figures.changes > 0);
  if (types.length === 0) return '–';
  return types.map(([type, figures]) => `${type} ${duration(figures.p50Ms)} / ${duration(figures.p99Ms)}`).join(', ');
}

/**
 * @param {string} label
 * @param {string} field
 * @param {string} value
 * @param {string} [hint]
 */
const stat = (label, field, value, hint) => h('div', { class: 'stat', title: hint }, h('dt', {}, label), h('dd', { 'data-field': field }, value));

/**
 * @param {AccountView} view
 */
function accountRow(view) {
  const { carrier, status } = view;
  const scheduler = status === undefined ? 'status unavailable' : !status.schedulerRunning ? 'scheduler not running' : status.paused ? 'paused' : 'running';
  const header = h(
    'header',
    {},
    h('h3', {}, carrier.name),
    h('span', { class: 'muted' }, `#${carrier.id} · gateway ${carrier.gatewayAccount}${carrier.enabled ? '' : ' · disabled'}`),
    h('span', { class: `badge ${status?.schedulerRunning === true && !status.paused ? 'ok' : 'warn'}`, 'data-field': 'scheduler' }, scheduler),
    status === undefined
      ? null
      : h(
          'span',
          { class: `badge limited-${status.limitedBy}`, 'data-field': 'limitedBy', title: 'what holds the account back now' },
          `limited by: ${status.limitedBy}`,
        ),
    view.openAlerts === undefined
      ? null
      : h(
          'span',
          { class: `badge ${view.openAlerts > 0 ? 'alert' : 'ok'}`, 'data-field': 'openAlerts' },
          `${view.openAlerts}${view.moreAlerts === true ? '+' : ''} open alerts`,
        ),
  );
  if (status === undefined)
    return h(
      'article',
      { class: 'account', 'data-carrier-id': carrier.id },
      header,
      h('p', { class: 'error' }, view.statusError ?? 'no status'),
      chartsOf(carrier.id, undefined),
    );
  const callsPerSec = status.groups.reduce((sum, group) => sum + group.usedLastSecond, 0);
  const engineLimit = status.orchestration === undefined ? '' : ` (engine ${status.orchestration.inflightLimit})`;
  const stats = h(
    'dl',
    { class: 'stats' },
    stat('calls/s', 'callsPerSec', num(callsPerSec), 'gateway calls granted in the last second, all groups'),
    stat('lateness p50 / p99', 'lateness', `${duration(status.latenessMs.p50)} / ${duration(status.latenessMs.p99)}`, 'start minus due time, last minute'),
    stat('staleness p50 / p99', 'staleness', stalenessText(status), 'a change at the carrier until known here, per type, changes learned in the last hour'),
    stat('lanes priority / normal', 'lanes', `${status.lanes.priority} / ${status.lanes.normal}`),
    stat('due now', 'dueNow', String(status.dueNow)),
    stat('in-flight / limit', 'inflight', `${status.inflight} / ${carrier.inflightLimit}${engineLimit}`),
    stat('executions/s needed', 'requiredExecutions', num(status.capacity.requiredExecutionsPerSec)),
    stat('stretch factor', 'stretchFactor', `×${num(status.capacity.stretchFactor)}`, 'how much longer than configured the intervals really are'),
    stat('expired leases', 'expiredLeases', String(status.expiredLeases)),
  );
  return h(
    'article',
    { class: 'account', 'data-carrier-id': carrier.id },
    header,
    h('div', { class: 'numbers' }, stats, groupTable(status)),
    chartsOf(carrier.id, status),
  );
}

/** @param {string} mode */
function showMode(mode) {
  currentMode = mode;
  byId('mode').textContent = mode;
  const button = /** @type {HTMLButtonElement} */ (byId('mode-switch'));
  button.textContent = `Switch to ${mode === 'carrier' ? 'legacy' : 'carrier'}`;
  button.disabled = false;
}

async function refresh() {
  const version = modeVersion;
  const [mode, carriers] = await Promise.all([
    /** @type {Promise<{ mode: string }>} */ (call('GET', '/v1/mode')),
    /** @type {Promise<{ items: Carrier[] }>} */ (call('GET', '/v1/carriers?limit=1000')),
  ]);
  const [views] = await Promise.all([Promise.all(carriers.items.map(accountView)), fetchHistory()]);
  if (version === modeVersion) showMode(mode.mode);
  const rows = byId('account-rows');
  rows.replaceChildren(...(views.length === 0 ? [h('p', { class: 'muted' }, 'No carrier accounts yet.')] : views.map(accountRow)));
  byId('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  byId('refresh-error').textContent = '';
}

async function loop() {
  timer = undefined;
  try {
    await refresh();
  } catch (error) {
    if (error instanceof Unauthorized) {
      askForToken('The API refused the token.');
      return;
    }
    byId('refresh-error').textContent = `refresh failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  timer = setTimeout(() => void loop(), REFRESH_MS);
}

function start() {
  byId('token-panel').hidden = true;
  byId('content').hidden = false;
  if (timer === undefined) void loop();
}

/** @param {string} [message] */
function askForToken(message) {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  forgetToken();
  byId('content').hidden = true;
  byId('token-panel').hidden = false;
  byId('token-error').textContent = message ?? '';
  byId('token-input').focus();
}

byId('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = /** @type {HTMLInputElement} */ (byId('token-input'));
  const token = input.value.trim();
  if (token === '') return;
  storeToken(token);
  input.value = '';
  start();
});

byId('forget-token').addEventListener('click', () => askForToken());

byId('mode-switch').addEventListener('click', () => {
  const target = currentMode === 'carrier' ? 'legacy' : 'carrier';
  if (!window.confirm(`Switch the polling mode to ${target}?`)) return;
  const button = /** @type {HTMLButtonElement} */ (byId('mode-switch'));
  const result = byId('mode-result');
  button.disabled = true;
  result.textContent = `switching to ${target}…`;
  modeVersion += 1;
  call('PUT', '/v1/mode', { mode: target })
    .then((value) => {
      const answer = /** @type {{ mode: string, changed: boolean }} */ (value);
      modeVersion += 1;
      showMode(answer.mode);
      result.textContent = answer.changed ? `switched to ${answer.mode} at ${time(Date.now())}` : `already ${answer.mode}`;
    })
    .catch((/** @type {unknown} */ error) => {
      button.disabled = false;
      if (error instanceof Unauthorized) askForToken('The API refused the token.');
      else result.textContent = `mode switch failed: ${error instanceof ApiError || error instanceof Error ? error.message : String(error)}`;
    });
});

initCardPanel({ onUnauthorized: () => askForToken('The API refused the token.') });

if (storedToken() === null) askForToken();
else start();
