/**
 * Alerts: failure alerts (card × type) and account alerts in one list, account alerts
 * first (fewer, broader), each newest first. Ids carry their kind (`failure-12`, `account-3`)
 * because the two tables number independently; a bare number means a failure alert, the id the
 * card detail shows.
 */
import { ackFailureAlert } from '../../db/alerts.js';
import { ackAccountAlert, pageAccountAlerts, pageFailureAlerts, type AccountAlertItem, type FailureAlertItem } from '../../db/statusQueries.js';
import { DomainError } from '../../domain/errors.js';
import { ID_RULE, isId } from '../../workflow-safe/ids.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { decodeCursor, pageOf, pageQuerySchema } from '../pagination.js';
import { alertSchema, errorResponses, idString, pageOfSchema } from '../schemas.js';

type AlertKind = 'account' | 'failure';
type AlertItem = (Omit<FailureAlertItem, 'id'> | Omit<AccountAlertItem, 'id'>) & { id: string };

const listQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...pageQuerySchema,
    kind: { type: 'string', enum: ['account', 'failure'] },
    status: { type: 'string', enum: ['open', 'all'], default: 'open' },
    carrierId: idString,
    cardId: { ...idString, description: 'failure alerts of one card (implies kind=failure)' },
  },
} as const;

const ALERT_ID = /^(?:(failure|account)-)?([0-9]+)$/;
/** `<kind>:<id>`, the key a nextCursor of this list encodes. */
const CURSOR = { test: (key: string): boolean => isId(/^(?:account|failure):([0-9]+)$/.exec(key)?.[1]) };

export function parseAlertId(raw: string): { kind: AlertKind; id: string } {
  const match = ALERT_ID.exec(raw);
  if (!match?.[2] || !isId(match[2])) {
    throw DomainError.invalid('id', `id must be failure-<n>, account-<n> or a failure alert number, n ${ID_RULE}; got ${JSON.stringify(raw)}`);
  }
  return { kind: match[1] === 'account' ? 'account' : 'failure', id: match[2] };
}

export function registerAlertRoutes(app: ApiApp, ctx: ApiContext): void {
  const { pool } = ctx.deps;

  app.get(
    '/v1/alerts',
    {
      schema: {
        tags: ['alerts'],
        summary: 'Failure and account alerts (open by default)',
        querystring: listQuerySchema,
        response: { 200: pageOfSchema(alertSchema), ...errorResponses },
      },
    },
    async (request) => {
      const { query } = request;
      const kinds: AlertKind[] = query.kind ? [query.kind] : query.cardId ? ['failure'] : ['account', 'failure'];
      const [cursorKind, cursorId] = (decodeCursor(query.cursor, CURSOR) ?? '').split(':') as [AlertKind | '', string | undefined];
      const filter = {
        openOnly: query.status === 'open',
        ...(query.carrierId ? { carrierId: query.carrierId } : {}),
        ...(query.cardId ? { cardId: query.cardId } : {}),
      };
      const items: AlertItem[] = [];
      // Walk the kinds in order, resuming inside the one the cursor points at.
      for (const kind of kinds.slice(cursorKind === '' ? 0 : Math.max(0, kinds.indexOf(cursorKind)))) {
        const wanted = query.limit + 1 - items.length;
        if (wanted <= 0) break;
        const before = kind === cursorKind ? cursorId : undefined;
        const page = kind === 'account' ? await pageAccountAlerts(pool, filter, before, wanted) : await pageFailureAlerts(pool, filter, before, wanted);
        items.push(...page.map((item) => ({ ...item, id: `${kind}-${item.id}` })));
      }
      return pageOf(items, query.limit, (item) => `${item.kind}:${item.id.slice(item.kind.length + 1)}`);
    },
  );

  app.post(
    '/v1/alerts/:id/ack',
    {
      schema: {
        tags: ['alerts'],
        summary: 'Acknowledge an alert (idempotent)',
        params: { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 40 } } },
        response: { 200: alertSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { kind, id } = parseAlertId(request.params.id);
      const actor = 'api';
      if (kind === 'failure') {
        const alert = await ackFailureAlert(pool, id, actor);
        request.log.info({ alertId: id, cardId: alert.cardId, carrierId: alert.carrierId }, 'failure alert acknowledged');
        return { ...alert, kind, id: `failure-${alert.id}` };
      }
      if (!(await ackAccountAlert(pool, id, actor))) throw DomainError.notFound('id', `alert account-${id} does not exist`);
      request.log.info({ alertId: id }, 'account alert acknowledged');
      const [alert] = await pageAccountAlerts(pool, { openOnly: false }, String(BigInt(id) + 1n), 1);
      return { ...alert, id: `account-${id}` };
    },
  );
}
