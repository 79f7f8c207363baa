// @ts-check
/**
 * Card search and detail: find a card by ICCID or id, show its due times, failures, open alerts
 * and recent executions (refreshed while open), link to its runs in the Temporal Web UI, and send
 * a request-check.
 */
import { ApiError, Unauthorized, call } from './api.js';
import { barChart } from './charts.js';
import { byId, duration, h, time } from './dom.js';

const CHECK_TYPES = ['card_status', 'carddata', 'realname', 'package'];
const REFRESH_MS = 3000;
const OUTCOME_COLORS = /** @type {Record<string, string>} */ ({ success: '#16a34a', partial: '#ea580c' });

/**
 * @typedef {{ cardId: string, iccid: string, carrierId: string, workflowId: string, workflowsUrl: string, workflowsQuery: string, runUrlPrefix: string }} Lookup
 * @typedef {{ startedAt: string, finishedAt?: string, types: string[], outcome: string, gatewayMs: number, workflowId: string, runId: string, runUrl?: string,
 *   fromPriority?: boolean }} Execution
 * @typedef {{ id: string, type: string, failCount: number, lastError?: string, openedAt: string }} CardAlert
 * @typedef {{ id: string, iccid: string, msisdn?: string, carrierId: string, status: string, enablePolling: boolean, polled?: boolean,
 *   due: Record<string, number>, failures: Record<string, { count: number, firstFailedAt?: number, lastError?: string }>,
 *   alerts: CardAlert[], executions: Execution[], temporalUiUrl: string }} CardDetail
 */

/** Bumped whenever another card is opened (or the panel closed): older refresh loops stop. */
let generation = 0;
/** @type {() => void} */
let unauthorized = () => undefined;

/**
 * @param {unknown} error
 * @param {HTMLElement} target
 */
function report(error, target) {
  if (error instanceof Unauthorized) {
    unauthorized();
    return;
  }
  target.textContent = error instanceof ApiError || error instanceof Error ? error.message : String(error);
}

/** @param {CardDetail} card */
function dueTable(card) {
  const now = Date.now();
  const rows = CHECK_TYPES.filter((type) => card.due[type] !== undefined).map((type) => {
    const due = card.due[type] ?? 0;
    return h(
      'tr',
      { 'data-type': type },
      h('td', {}, type),
      h('td', {}, time(due)),
      h('td', { class: due < now ? 'num late' : 'num' }, due < now ? `${duration(now - due)} overdue` : `in ${duration(due - now)}`),
    );
  });
  return h(
    'section',
    { 'data-section': 'due' },
    h('h4', {}, 'Due times'),
    rows.length === 0
      ? h('p', { class: 'muted' }, 'Not polled: no due times.')
      : h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'type'), h('th', {}, 'due at'), h('th', {}, ''))), h('tbody', {}, rows)),
  );
}

/** @param {CardDetail} card */
function failureTable(card) {
  const entries = Object.entries(card.failures);
  return h(
    'section',
    { 'data-section': 'failures' },
    h('h4', {}, 'Failures'),
    entries.length === 0
      ? h('p', { class: 'muted' }, 'No failing type.')
      : h(
          'table',
          {},
          h('thead', {}, h('tr', {}, h('th', {}, 'type'), h('th', {}, 'failures in a row'), h('th', {}, 'since'), h('th', {}, 'last error'))),
          h(
            'tbody',
            {},
            entries.map(([type, failure]) =>
              h(
                'tr',
                { 'data-type': type },
                h('td', {}, type),
                h('td', { class: 'num' }, failure.count),
                h('td', {}, time(failure.firstFailedAt)),
                h('td', {}, failure.lastError ?? ''),
              ),
            ),
          ),
        ),
    card.alerts.length === 0
      ? null
      : h(
          'p',
          { class: 'error', 'data-field': 'cardAlerts' },
          `Open alerts: ${card.alerts.map((alert) => `${alert.type} (${alert.failCount} failures since ${time(alert.openedAt)})`).join('; ')}`,
        ),
  );
}

/**
 * @param {CardDetail} card
 * @param {Lookup} lookup
 */
function executionsSection(card, lookup) {
  const rows = card.executions.map((execution) =>
    h(
      'tr',
      { 'data-outcome': execution.outcome, 'data-lane': execution.fromPriority === true ? 'priority' : 'normal' },
      h('td', {}, time(execution.startedAt)),
      h('td', {}, execution.types.join(', ')),
      h('td', { class: `outcome-${execution.outcome}` }, execution.outcome),
      h('td', { class: 'num' }, `${execution.gatewayMs} ms`),
      h('td', {}, execution.fromPriority === true ? 'priority' : 'normal'),
      // The run that executed it: the card's own cardCheck run, or the cardBatch run that carried it.
      h(
        'td',
        {},
        h(
          'a',
          {
            href: execution.runUrl ?? `${lookup.runUrlPrefix}${encodeURIComponent(execution.runId)}/history`,
            target: '_blank',
            rel: 'noopener',
            title: execution.workflowId,
          },
          execution.workflowId === lookup.workflowId ? 'run' : 'batch run',
        ),
      ),
    ),
  );
  const chart = barChart({
    title: 'Gateway latency per execution',
    unit: 'ms',
    field: 'gatewayMs',
    bars: [...card.executions].reverse().map((execution) => ({
      label: execution.startedAt,
      value: execution.gatewayMs,
      color: OUTCOME_COLORS[execution.outcome] ?? '#dc2626',
      title: `${time(execution.startedAt)} ${execution.outcome} ${execution.gatewayMs} ms`,
    })),
  });
  return h(
    'section',
    { 'data-section': 'executions' },
    h('h4', {}, `Recent executions (${card.executions.length})`),
    card.executions.length === 0
      ? h('p', { class: 'muted' }, 'No execution yet.')
      : [
          chart,
          h(
            'table',
            { id: 'executions' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'started'),
                h('th', {}, 'types'),
                h('th', {}, 'outcome'),
                h('th', {}, 'gateway'),
                h('th', {}, 'lane'),
                h('th', {}, 'Temporal'),
              ),
            ),
            h('tbody', {}, rows),
          ),
        ],
  );
}

/**
 * @param {Lookup} lookup
 * @param {number} mine
 */
async function refreshDetail(lookup, mine) {
  const live = byId('card-live');
  try {
    const card = /** @type {CardDetail} */ (await call('GET', `/v1/cards/${lookup.cardId}`));
    if (mine !== generation) return;
    byId('card-summary').textContent =
      `card ${card.id} · ICCID ${card.iccid}${card.msisdn === undefined ? '' : ` · MSISDN ${card.msisdn}`} · carrier #${card.carrierId} · ${card.status} · polling ${card.enablePolling ? 'on' : 'off'}`;
    live.replaceChildren(dueTable(card), failureTable(card), executionsSection(card, lookup));
    byId('card-error').textContent = '';
  } catch (error) {
    if (mine !== generation) return;
    report(error, byId('card-error'));
    if (error instanceof Unauthorized) return;
  }
  setTimeout(() => {
    if (mine === generation) void refreshDetail(lookup, mine);
  }, REFRESH_MS);
}

/** @param {Lookup} lookup */
function requestCheckForm(lookup) {
  const result = h('span', { id: 'request-check-result', role: 'status' });
  const lane = h('select', { id: 'request-check-lane' }, h('option', { value: 'priority' }, 'priority lane'), h('option', { value: 'normal' }, 'normal lane'));
  const form = h(
    'form',
    { id: 'request-check-form' },
    h('strong', {}, 'Request check: '),
    CHECK_TYPES.map((type) => h('label', {}, h('input', { type: 'checkbox', name: 'type', value: type, checked: type === 'card_status' }), ` ${type} `)),
    lane,
    h('button', { type: 'submit' }, 'Request check'),
    ' ',
    result,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const types = [...form.querySelectorAll('input[name="type"]:checked')].map((input) => /** @type {HTMLInputElement} */ (input).value);
    if (types.length === 0) {
      result.textContent = 'choose at least one type';
      return;
    }
    result.textContent = 'requesting…';
    call('POST', `/v1/cards/${lookup.cardId}/request-check`, { types, lane: /** @type {HTMLSelectElement} */ (lane).value })
      .then((value) => {
        const answer = /** @type {{ status: string, requested: number, types?: Record<string, string> }} */ (value);
        const perType =
          answer.types === undefined
            ? ''
            : ` (${Object.entries(answer.types)
                .map(([type, outcome]) => `${type}: ${outcome}`)
                .join(', ')})`;
        result.textContent = `${answer.status}: ${answer.requested} type(s)${perType} at ${new Date().toLocaleTimeString()}`;
      })
      .catch((/** @type {unknown} */ error) => report(error, result));
  });
  return form;
}

/** @param {string} query */
async function open(query) {
  const mine = ++generation;
  const detail = byId('card-detail');
  const error = byId('card-error');
  error.textContent = '';
  try {
    const lookup = /** @type {Lookup} */ (await call('GET', `/dashboard/api/cards/lookup?q=${encodeURIComponent(query)}`));
    if (mine !== generation) return;
    const link = /** @type {HTMLAnchorElement} */ (byId('temporal-link'));
    link.href = lookup.workflowsUrl;
    link.textContent = `Executions of card ${lookup.cardId} in the Temporal Web UI (${lookup.workflowsQuery})`;
    byId('request-check-slot').replaceChildren(requestCheckForm(lookup));
    byId('card-live').replaceChildren();
    detail.hidden = false;
    await refreshDetail(lookup, mine);
  } catch (caught) {
    if (mine !== generation) return;
    detail.hidden = true;
    report(caught, error);
  }
}

/** @param {{ onUnauthorized: () => void }} options */
export function initCardPanel(options) {
  unauthorized = options.onUnauthorized;
  byId('card-search-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const query = /** @type {HTMLInputElement} */ (byId('card-query')).value.trim();
    if (query !== '') void open(query);
  });
  byId('card-close').addEventListener('click', () => {
    generation += 1;
    byId('card-detail').hidden = true;
  });
}
