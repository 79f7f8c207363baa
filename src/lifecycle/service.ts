/**
 * Card lifecycle (DESIGN §7, §8; seed 002): each event writes PostgreSQL first and then, in
 * carrier mode, brings the account's Redis structures in line. PostgreSQL first because a crash
 * between the two then leaves Redis stale in the safe direction (a rebuild or the next event
 * repairs it), never a card that PostgreSQL polls but nobody will ever re-add.
 * In legacy mode only PostgreSQL changes (another system polls).
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
import { initialDues } from './jitter.js';
import { loadPollingContext, type PollingContext } from './pollingContext.js';
import type { LifecycleStore } from './queueStore.js';
import type { UpsertInput } from '../redis/carrierQueueStore.js';

export interface LifecycleDeps {
  readonly pool: pg.Pool;
  readonly store: LifecycleStore;
  /** Clock in ms; tests pass a fixed one. */
  readonly now?: () => number;
  /** [0, 1) source for the initial jitter. */
  readonly random?: () => number;
}

export interface BatchCreateResult {
  readonly created: ScopedCard[];
  readonly rejected: Rejection[];
}

export class LifecycleService {
  private readonly pool: pg.Pool;
  private readonly store: LifecycleStore;
  private readonly now: (() => number) | undefined;
  private readonly random: () => number;

  constructor(deps: LifecycleDeps) {
    this.pool = deps.pool;
    this.store = deps.store;
    this.now = deps.now;
    this.random = deps.random ?? Math.random;
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

    const created = await withTransaction(this.pool, async (client) => {
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
      return cards;
    });
    rejected.sort((a, b) => a.row - b.row);
    await this.sync(created);
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
    const cards = await updateStatuses(this.pool, changes);
    await this.sync(cards);
    return cards;
  }

  /** Deletes the card; returns false when it did not exist. */
  async deleteCard(cardId: string): Promise<boolean> {
    const card = await deleteCardRow(this.pool, cardId);
    if (!card) return false;
    const context = await loadPollingContext(this.pool);
    if (context.mode === 'carrier') await this.store.remove(card.carrierId, card.id);
    return true;
  }

  async enablePolling(cardId: string): Promise<ScopedCard> {
    const card = await setCardPolling(this.pool, cardId, true);
    await this.sync([card]);
    return card;
  }

  async disablePolling(cardId: string): Promise<ScopedCard> {
    const card = await setCardPolling(this.pool, cardId, false);
    await this.sync([card]);
    return card;
  }

  /** Device switch: every bound non-standalone card follows (one statement, one pipeline). */
  async setDevicePolling(deviceId: string, enabled: boolean): Promise<ScopedCard[]> {
    requireBoolean(enabled, 'enabled');
    const cards = await setDevicePollingRow(this.pool, deviceId, enabled);
    await this.sync(cards);
    return cards;
  }

  /**
   * Moves a card to another account: removed from the old account's keys first, then upserted
   * under the new one (briefly in neither, never in both — DESIGN §3).
   */
  async changeCarrier(cardId: string, carrierId: string): Promise<ScopedCard> {
    const { card, previousCarrierId } = await mappedCarrier(() => setCardCarrier(this.pool, cardId, carrierId));
    const context = await loadPollingContext(this.pool);
    if (context.mode !== 'carrier') return card;
    if (previousCarrierId !== card.carrierId) await this.store.remove(previousCarrierId, card.id);
    await this.store.upsertMany([this.upsertFor(card, context, this.now ? this.now() : await this.store.clockNow())]);
    return card;
  }

  /** Re-derives Redis state of the given cards from PostgreSQL (e.g. after a polling config change). */
  async resync(cardIds: readonly string[]): Promise<ScopedCard[]> {
    const cards = await findCards(
      this.pool,
      cardIds.map((id, index) => requireId(id, `cardIds[${index}]`)),
    );
    await this.sync(cards);
    return cards;
  }

  /** Polled cards with intervals are upserted with jittered dues; the rest are removed (empty dues). */
  private async sync(cards: readonly ScopedCard[]): Promise<void> {
    if (cards.length === 0) return;
    const context = await loadPollingContext(this.pool);
    if (context.mode !== 'carrier') return;
    // Due times on the store's clock (Redis TIME), not this host's.
    const now = this.now ? this.now() : await this.store.clockNow();
    await this.store.upsertMany(cards.map((card) => this.upsertFor(card, context, now)));
  }

  private upsertFor(card: ScopedCard, context: PollingContext, now: number): UpsertInput {
    const intervals = card.polled ? context.intervals.resolve(card) : {};
    // Empty dues = "no types": the store's upsert removes the card from both lanes.
    return { carrierId: card.carrierId, cardId: card.id, now, dues: initialDues(intervals, now, this.random) };
  }
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
