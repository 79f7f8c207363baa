/**
 * Card lifecycle (docs/design.md, 'Lifecycle'): each event writes PostgreSQL and, in the same
 * transaction, its rows of the lifecycle outbox (the (card, account) pairs whose Redis keys it
 * changes); after the commit it applies them to Redis itself and deletes them. When Redis fails
 * or the process dies in between, the rows stay and the outbox relay (src/lifecycle/outboxRelay.ts)
 * applies them until they succeed: no event leaves a polled card out of every lane, or a card
 * moved between accounts in neither. The caller's answer does not wait for a Redis that is away:
 * the change is durable once committed. In legacy mode only PostgreSQL changes (another system
 * polls); the rows are then dropped, the switch to carrier mode rebuilds Redis.
 */
import type pg from 'pg';
import { existingIccids, findCards, insertCards, deleteCard as deleteCardRow, setCardCarrier, setCardPolling, updateStatuses } from '../db/cards.js';
import { existingCarrierIds } from '../db/carriers.js';
import { existingDeviceIds, setDevicePolling as setDevicePollingRow } from '../db/devices.js';
import { withTransaction } from '../db/pool.js';
import type { ScopedCard, NewCard, CardStatus } from '../domain/card.js';
import { isCardStatus } from '../domain/card.js';
import { normaliseCard, rejectionOf, type CardRow, type Rejection } from '../domain/cardInput.js';
import { DomainError } from '../domain/errors.js';
import { requireBoolean, requireId } from '../domain/validate.js';
import type { RedisConnection } from '../redis/connection.js';
import { applyRefs, type ApplyDeps, type SchedulerWaker } from './apply.js';
import { deleteOutboxRows, insertOutboxRows, type OutboxRef } from './outboxRows.js';
import { loadPollingContext } from './pollingContext.js';
import type { LifecycleStore } from './queueStore.js';
import { defaultLogger } from '../runtime/logger.js';

/** How long the relay leaves an event's rows to the event's own writer before taking them. */
export const DEFAULT_OUTBOX_GRACE_MS = 5000;

export interface LifecycleDeps {
  readonly pool: pg.Pool;
  readonly store: LifecycleStore;
  /** Reads the due times a card keeps across an event. */
  readonly redis: RedisConnection;
  /** Key namespace the store uses (empty in production). */
  readonly namespace?: string;
  /** Clock in ms; tests pass a fixed one. */
  readonly now?: () => number;
  /** Wakes schedulers that sleep past a due time an event wrote (src/lifecycle/apply.ts). */
  readonly wakeSchedulers?: SchedulerWaker;
  /** [0, 1) source for the initial jitter. */
  readonly random?: () => number;
  /** @default {@link DEFAULT_OUTBOX_GRACE_MS} */
  readonly outboxGraceMs?: number;
  /** Where an event that reached PostgreSQL but not Redis is reported (its rows stay for the relay). */
  readonly log?: (line: string) => void;
}

/** What one event wrote: the caller's result, the pairs it changes, and the cards as written (when known). */
export interface LifecycleWrite<T> {
  readonly result: T;
  readonly refs: readonly OutboxRef[];
  readonly cards?: readonly ScopedCard[];
}

export interface BatchCreateResult {
  readonly created: ScopedCard[];
  readonly rejected: Rejection[];
}

export class LifecycleService {
  private readonly pool: pg.Pool;
  private readonly applyDeps: ApplyDeps;
  private readonly graceMs: number;
  private readonly log: (line: string) => void;

  constructor(deps: LifecycleDeps) {
    this.pool = deps.pool;
    this.applyDeps = {
      pool: deps.pool,
      store: deps.store,
      redis: deps.redis,
      namespace: deps.namespace ?? '',
      ...(deps.now ? { now: deps.now } : {}),
      ...(deps.random ? { random: deps.random } : {}),
      ...(deps.wakeSchedulers ? { wakeSchedulers: deps.wakeSchedulers } : {}),
    };
    this.graceMs = deps.outboxGraceMs ?? DEFAULT_OUTBOX_GRACE_MS;
    this.log = deps.log ?? ((line) => defaultLogger().warn(line));
  }

  /** One card; bad input throws DomainError naming the field (nothing written). */
  async createCard(input: NewCard): Promise<ScopedCard> {
    const { created, rejected } = await this.createCards([input]);
    const rejection = rejected[0];
    if (rejection) throw new DomainError(rejection.code, rejection.reason, rejection.field);
    return created[0]!;
  }

  /**
   * Many cards: valid rows are inserted in one statement, invalid ones come back as rejections
   * (row index, field, reason). Redis gets one pipeline for all polled cards.
   */
  async createCards(inputs: readonly NewCard[]): Promise<BatchCreateResult> {
    const rejected: Rejection[] = [];
    const valid: { row: number; card: CardRow }[] = [];
    const seen = new Set<string>();
    inputs.forEach((input, row) => {
      try {
        const card = normaliseCard(input);
        if (seen.has(card.iccid)) throw DomainError.conflict('iccid', `iccid ${card.iccid} appears twice in this batch`);
        seen.add(card.iccid);
        valid.push({ row, card });
      } catch (error) {
        rejected.push(rejectionOf(row, error));
      }
    });
    if (valid.length === 0) return { created: [], rejected };

    const created = await this.event(async (client) => {
      // Existence checks for the whole batch: three statements, not three per row.
      const iccids = await existingIccids(
        client,
        valid.map((entry) => entry.card.iccid),
      );
      const carriers = await existingCarrierIds(client, [...new Set(valid.map((entry) => entry.card.carrierId))]);
      const deviceIds = valid.flatMap((entry) => (entry.card.deviceId === null ? [] : [entry.card.deviceId]));
      const devices = deviceIds.length > 0 ? await existingDeviceIds(client, [...new Set(deviceIds)]) : new Set<string>();
      const accepted = valid.filter(({ row, card }) => {
        if (iccids.has(card.iccid)) rejected.push({ row, code: 'conflict', field: 'iccid', reason: `iccid ${card.iccid} already exists` });
        else if (!carriers.has(card.carrierId))
          rejected.push({ row, code: 'not_found', field: 'carrierId', reason: `carrier account ${card.carrierId} does not exist` });
        else if (card.deviceId !== null && !devices.has(card.deviceId))
          rejected.push({ row, code: 'not_found', field: 'deviceId', reason: `device ${card.deviceId} does not exist` });
        else return true;
        return false;
      });
      const cards = await insertCards(
        client,
        accepted.map((entry) => entry.card),
      );
      // A row inserted concurrently by someone else between the check and the insert (ON CONFLICT skipped it).
      const insertedIccids = new Set(cards.map((card) => card.iccid));
      for (const { row, card } of accepted) {
        if (!insertedIccids.has(card.iccid)) rejected.push({ row, code: 'conflict', field: 'iccid', reason: `iccid ${card.iccid} already exists` });
      }
      return { result: cards, refs: ownRefs(cards), cards };
    });
    rejected.sort((a, b) => a.row - b.row);
    return { created, rejected };
  }

  async changeStatus(cardId: string, status: CardStatus): Promise<ScopedCard> {
    const [card] = await this.changeStatuses([{ cardId: requireId(cardId, 'cardId'), status }]);
    if (!card) throw DomainError.notFound('cardId', `card ${cardId} does not exist`);
    return card;
  }

  /**
   * Many status changes: one UPDATE (returning scope), one context query, one Redis pipeline.
   * Cards still polled are re-matched and re-jittered; cards that no longer match any interval
   * leave polling. Unknown ids are ignored (absent from the result).
   */
  async changeStatuses(changes: readonly { cardId: string; status: CardStatus }[]): Promise<ScopedCard[]> {
    changes.forEach((change, index) => {
      requireId(change.cardId, `changes[${index}].cardId`);
      if (!isCardStatus(change.status)) throw DomainError.invalid(`changes[${index}].status`, `${String(change.status)} is not a card status`);
    });
    if (changes.length === 0) return [];
    return this.event(async (client) => {
      const cards = await updateStatuses(client, changes);
      return { result: cards, refs: ownRefs(cards), cards };
    });
  }

  /** Deletes the card; returns false when it did not exist. */
  async deleteCard(cardId: string): Promise<boolean> {
    return this.event(async (client) => {
      const card = await deleteCardRow(client, cardId);
      // Gone from PostgreSQL: no card to read, so the pair's target is "not polled" (removed).
      return card ? { result: true, refs: [{ cardId: card.id, carrierId: card.carrierId }], cards: [] } : { result: false, refs: [] };
    });
  }

  async enablePolling(cardId: string): Promise<ScopedCard> {
    return this.setPolling(cardId, true);
  }

  async disablePolling(cardId: string): Promise<ScopedCard> {
    return this.setPolling(cardId, false);
  }

  private setPolling(cardId: string, enabled: boolean): Promise<ScopedCard> {
    return this.event(async (client) => {
      const card = await setCardPolling(client, cardId, enabled);
      return { result: card, refs: ownRefs([card]), cards: [card] };
    });
  }

  /** Device switch: every bound non-standalone card follows (one statement, one pipeline). */
  async setDevicePolling(deviceId: string, enabled: boolean): Promise<ScopedCard[]> {
    requireBoolean(enabled, 'enabled');
    return this.event(async (client) => {
      const cards = await setDevicePollingRow(client, deviceId, enabled);
      return { result: cards, refs: ownRefs(cards), cards };
    });
  }

  /**
   * Moves a card to another account: removed from the old account's keys first, then upserted
   * under the new one (briefly in neither, never in both — docs/design.md, 'Lifecycle').
   */
  async changeCarrier(cardId: string, carrierId: string): Promise<ScopedCard> {
    return this.event(async (client) => {
      const { card, previousCarrierId } = await mappedCarrier(() => setCardCarrier(client, cardId, carrierId));
      // Both accounts' keys follow: the old one loses the card, the new one gains it.
      return { result: card, refs: [{ cardId: card.id, carrierId: previousCarrierId }, ...ownRefs([card])], cards: [card] };
    });
  }

  /** Re-derives Redis state of the given cards from PostgreSQL (e.g. after a polling config change). */
  async resync(cardIds: readonly string[]): Promise<ScopedCard[]> {
    const ids = cardIds.map((id, index) => requireId(id, `cardIds[${index}]`));
    return this.event(async (client) => {
      const cards = await findCards(client, ids);
      return { result: cards, refs: ownRefs(cards), cards };
    });
  }

  /**
   * A caller's own card write as one event (the card import's batch, src/api/importCards.ts): its
   * statements and the outbox rows of the pairs it returns commit together or not at all, so no
   * card lands without the rows that bring it into Redis. Throws only when the transaction failed
   * (nothing written); after the commit, as every event, it never throws.
   */
  async writeCards<T>(write: (client: pg.PoolClient) => Promise<LifecycleWrite<T>>): Promise<T> {
    return this.event(write);
  }

  /**
   * One event: its PostgreSQL write and outbox rows in one transaction, then the rows applied and
   * deleted. A failure after the commit is logged, not thrown: the change is durable, the rows
   * stay, and the relay applies them.
   */
  private async event<T>(write: (client: pg.PoolClient) => Promise<LifecycleWrite<T>>): Promise<T> {
    const { written, rowIds } = await withTransaction(this.pool, async (client) => {
      const result = await write(client);
      return { written: result, rowIds: await insertOutboxRows(client, result.refs, this.graceMs) };
    });
    if (written.refs.length === 0) return written.result;
    try {
      const context = await loadPollingContext(this.pool);
      const cards = written.cards ? new Map(written.cards.map((card) => [card.id, card])) : undefined;
      if (await applyRefs(this.applyDeps, context, written.refs, cards)) await deleteOutboxRows(this.pool, rowIds);
    } catch (error) {
      this.log(`lifecycle: ${written.refs.length} card(s) changed in PostgreSQL but not yet in Redis (the outbox relay applies them): ${String(error)}`);
    }
    return written.result;
  }
}

/** Each card's pair under the account it belongs to now. */
function ownRefs(cards: readonly ScopedCard[]): OutboxRef[] {
  return cards.map((card) => ({ cardId: card.id, carrierId: card.carrierId }));
}

/** An unknown target account surfaces as the FK violation; name the field. */
async function mappedCarrier<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if ((error as { code?: string }).code === '23503') throw DomainError.notFound('carrierId', 'carrier account does not exist');
    throw error;
  }
}
