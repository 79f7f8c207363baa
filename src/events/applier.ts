/**
 * Applies stored carrier events (docs/design.md, 'Freshness'): each becomes its card's observation
 * (the same row a check's answer makes, so the card's latest values, staleness and history read it
 * alike), moves that type's next check out by its interval and reaches a pending confirmation it
 * shows (lua/observed.lua). An event whose ICCID the account does not hold is marked
 * `unknown_card` and counted, never retried.
 *
 * One batch is one transaction: the oldest pending events locked (SKIP LOCKED, so several ingest
 * processes share the backlog), their rows written, Redis told, the events marked. Redis is told
 * before the commit: a failure there rolls the batch back and it is applied again, which Redis
 * absorbs (a state no newer than the type's last success moves nothing).
 */
import type { Pool } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { insertChanges, type ChangeRow, type LearnedChange } from '../db/cardChanges.js';
import { insertObservations, type ObservationRow } from '../db/observations.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { ObservedResult } from '../redis/carrierScripts.js';
import type { ReferenceData } from '../runtime/referenceData.js';
import type { LearnedChangesObserver } from '../ingest/stalenessMetric.js';
import { lockPendingEvents, markEvents, type PendingEvent } from './store.js';

export interface EventApplierDeps {
  readonly pool: Pool;
  readonly store: CarrierQueueStore;
  readonly reference: ReferenceData;
  readonly learned?: LearnedChangesObserver;
}

export interface AppliedBatch {
  readonly events: number;
  readonly applied: number;
  readonly unknownCard: number;
  /** Per outcome of lua/observed.lua: the events whose card's schedule moved, reached its confirmation, … */
  readonly schedule: Readonly<Record<ObservedResult, number>>;
}

/** The state a delayed confirmation compares, as src/domain/finishPlan.ts observedState reads a check's answer. */
function confirmableState(event: PendingEvent): string | undefined {
  const value = event.type === 'card_status' ? event.observation.network : event.type === 'realname' ? event.observation.realname : undefined;
  return typeof value === 'string' ? value : undefined;
}

/** The observation row of an event: its id is the account's event id, kept apart from gateway collection ids. */
export function eventObservationId(carrierId: string, eventId: string): string {
  return `event:${carrierId}:${eventId}`.slice(0, 200);
}

export async function applyPendingEvents(deps: EventApplierDeps, limit: number): Promise<AppliedBatch> {
  const schedule: Record<ObservedResult, number> = { moved: 0, confirmed: 0, unchanged: 0, not_polled: 0 };
  const intervals = await deps.reference.intervals();
  const { batch, learned } = await withTransaction(deps.pool, async (client) => {
    const events = await lockPendingEvents(client, limit);
    const known = events.filter((e): e is PendingEvent & { cardId: string; cardStatus: string } => e.cardId !== null && e.cardStatus !== null);
    const observations: ObservationRow[] = known.map((e) => ({
      observationId: eventObservationId(e.carrierId, e.eventId),
      cardId: e.cardId,
      carrierId: e.carrierId,
      type: e.type,
      observedAt: e.observedAt,
      payload: e.observation,
    }));
    // Learned when it reached us (received), not when the carrier saw it: staleness counts the push's delay.
    const changes: ChangeRow[] = known.flatMap((e) =>
      e.changedAt === null ? [] : [{ cardId: e.cardId, carrierId: e.carrierId, type: e.type, changedAt: e.changedAt, learnedAt: e.receivedAt }],
    );
    const learnedNow: LearnedChange[] = await insertChanges(client, changes);
    await insertObservations(client, observations);
    const moves = known.flatMap((e) => {
      const intervalSec = intervals.resolve({ carrierId: e.carrierId, status: e.cardStatus })[e.type];
      if (intervalSec === undefined) return [];
      const state = confirmableState(e);
      return [
        {
          carrierId: e.carrierId,
          cardId: e.cardId,
          type: e.type,
          observedAtMs: e.observedAt.getTime(),
          intervalMs: intervalSec * 1000,
          ...(state === undefined ? {} : { state }),
        },
      ];
    });
    for (const result of moves.length > 0 ? await deps.store.observedMany(moves) : []) schedule[result] += 1;
    schedule.not_polled += known.length - moves.length;
    await markEvents(client, events);
    return { batch: { events: events.length, applied: known.length, unknownCard: events.length - known.length, schedule }, learned: learnedNow };
  });
  if (learned.length > 0) deps.learned?.(learned);
  return batch;
}
