/**
 * A bulk request-check (`POST /v1/request-checks`, `cli request-checks`): many cards in one call,
 * named by id or by a filter, each served exactly as a single request-check (a durable priority
 * item, then `requestCheck.lua`), and one answer with what became of every card. An account's
 * scheduler is asked once whether it runs and woken once, however many of its cards are asked for
 * (docs/design.md §11): a bulk "check this customer's cards again" must not cost an update per card.
 */
import { listCards } from '../db/cards.js';
import { eachLimited } from '../runtime/eachLimited.js';
import type { Queryable } from '../db/queryable.js';
import { describeFailure } from '../db/errors.js';
import { isDomainError } from '../domain/errors.js';
import type { CardStatus } from '../domain/card.js';
import type { RequestChecker } from './ports.js';
import { schedulerRunning, wakeScheduler, type OrchestrationRef } from './temporalControl.js';
import type { RequestCheckInput, RequestCheckResult } from '../workflow-safe/requestCheck.js';
import { RequestCheckInvalid, validateRequestCheck } from '../workflow-safe/requestCheckValidation.js';

/** Most cards one bulk request names, by ids or by filter: an answer and a burst an operator can read and the accounts' budgets clear in minutes. */
export const MAX_BULK_REQUEST_CARDS = 10_000;
/** Request-checks served at once: each is a short PostgreSQL transaction and a Lua call. */
const CONCURRENCY = 8;

export type BulkSelection = { readonly cardIds: readonly string[] } | { readonly filter: { readonly carrierId: string; readonly status?: CardStatus } };

/** What the request asks of every card: a single request-check's fields. */
export type BulkRequest = Omit<RequestCheckInput, 'cardId'>;

export type BulkCardResult =
  | ({ readonly cardId: string } & RequestCheckResult)
  /** `not_found`: no such card; `unavailable`: its account's scheduler does not run (nothing written, try again); `failed`: this card's request failed. */
  | { readonly cardId: string; readonly status: 'not_found' | 'unavailable' | 'failed'; readonly requested: 0; readonly error: string };

export interface BulkAnswer {
  readonly cards: number;
  /** Cards by status. */
  readonly counts: Readonly<Record<BulkCardResult['status'], number>>;
  readonly results: readonly BulkCardResult[];
}

export interface BulkDeps {
  readonly pool: Queryable;
  readonly ref: OrchestrationRef;
  readonly requests: RequestChecker;
  /** Wake a scheduler after its cards were requested (false when claim loops look at their lanes every tick: SCHEDULER_LOOP=activity). */
  readonly wake: boolean;
}

/** Thrown for a selection that cannot be served as asked (too many cards): the caller's 400. */
export class BulkSelectionInvalid extends RequestCheckInvalid {}

/** The cards of the selection and their accounts, in the order asked (ids) or id order (filter). */
async function selectedCards(pool: Queryable, selection: BulkSelection): Promise<{ cardId: string; carrierId: string | undefined }[]> {
  if ('cardIds' in selection) {
    const ids = [...new Set(selection.cardIds)];
    if (ids.length > MAX_BULK_REQUEST_CARDS)
      throw new BulkSelectionInvalid('cardIds', `at most ${MAX_BULK_REQUEST_CARDS} cards per request, got ${ids.length}`);
    const { rows } = await pool.query<{ id: string; carrier_id: string }>('SELECT id::text, carrier_id::text FROM iot_card WHERE id = ANY($1::bigint[])', [
      ids,
    ]);
    const carrierOf = new Map(rows.map((row) => [row.id, row.carrier_id]));
    return ids.map((cardId) => ({ cardId, carrierId: carrierOf.get(cardId) }));
  }
  const { carrierId, status } = selection.filter;
  const cards = await listCards(pool, { carrierId, polled: true, ...(status === undefined ? {} : { status }) }, '0', MAX_BULK_REQUEST_CARDS + 1);
  if (cards.length > MAX_BULK_REQUEST_CARDS)
    throw new BulkSelectionInvalid(
      'filter',
      `matches more than ${MAX_BULK_REQUEST_CARDS} polled cards; narrow it (status) or name the cards in pages of cardIds`,
    );
  return cards.map((card) => ({ cardId: card.id, carrierId: card.carrierId }));
}

export async function bulkRequestCheck(deps: BulkDeps, selection: BulkSelection, request: BulkRequest): Promise<BulkAnswer> {
  // The request's own fields are checked once, with the rules of a single request-check (a placeholder id).
  validateRequestCheck({ ...request, cardId: '1' });
  const cards = await selectedCards(deps.pool, selection);
  const results = new Map<string, BulkCardResult>();
  const byAccount = new Map<string, string[]>();
  for (const { cardId, carrierId } of cards) {
    if (carrierId === undefined) results.set(cardId, { cardId, status: 'not_found', requested: 0, error: `card ${cardId} does not exist` });
    else byAccount.set(carrierId, [...(byAccount.get(carrierId) ?? []), cardId]);
  }
  for (const [carrierId, cardIds] of byAccount) {
    const running = await schedulerRunning(deps.ref, carrierId).catch(() => false);
    if (!running) {
      const error = `the scheduler of carrier account ${carrierId} is not running; nothing was written, retry once it runs`;
      for (const cardId of cardIds) results.set(cardId, { cardId, status: 'unavailable', requested: 0, error });
      continue;
    }
    let requested: string | undefined;
    await eachLimited(cardIds, CONCURRENCY, async (cardId) => {
      try {
        const result = await deps.requests.requestCheck(carrierId, { ...request, cardId });
        results.set(cardId, { cardId, ...result });
        if (result.requested > 0) requested ??= cardId;
      } catch (error) {
        const message = isDomainError(error) || error instanceof RequestCheckInvalid ? error.message : describeFailure(error);
        results.set(cardId, { cardId, status: 'failed', requested: 0, error: message });
      }
    });
    // One wake per account, not awaited: the items are durable already (as for a single request, requestCheckService.ts).
    if (deps.wake && requested !== undefined) void wakeScheduler(deps.ref, carrierId, requested).catch(() => undefined);
  }
  const ordered = cards.map(({ cardId }) => results.get(cardId)).filter((result): result is BulkCardResult => result !== undefined);
  const counts = { requested: 0, cooldown: 0, not_polled: 0, not_found: 0, unavailable: 0, failed: 0 };
  for (const result of ordered) counts[result.status] += 1;
  return { cards: ordered.length, counts, results: ordered };
}
