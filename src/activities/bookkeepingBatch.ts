/**
 * The card bookkeeping of a `cardBatch` run in one local activity per flush: the calls its cards
 * make at the same point (every card preparing, every card finishing, every record) go to the
 * worker as one activity, so the run's history holds one marker for all of them instead of one per
 * card and call (docs/design.md, "The batched run shape").
 *
 * Each call runs through the very activity a `cardCheck` run calls for its one card (prepare,
 * release, finish, record): the rules stay in one place. The calls are idempotent, as those
 * activities are, so a retried flush repeats them harmlessly.
 */
import type { CardActivities } from './card.js';
import type { IngestActivities } from './ingest.js';

/** The per-card activities a flush may carry, by name. */
export type BookkeepingActivities = Pick<CardActivities, 'prepareExecution' | 'releaseClaim' | 'finishNotPolled' | 'finishExecution'> &
  Pick<IngestActivities, 'recordExecution' | 'enqueueRecord'>;
export type BookkeepingKind = keyof BookkeepingActivities;

/** One card's call: which activity, with its input. */
export type BookkeepingCall = { [K in BookkeepingKind]: { readonly kind: K; readonly input: Parameters<BookkeepingActivities[K]>[0] } }[BookkeepingKind];

/** One call's outcome, in the order of the calls. */
export type BookkeepingSettled = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string };

/**
 * Attempts of one card's call inside a flush before its failure is that card's: a failure of some
 * cards only (one card's row, one slow key) must not hold the others. When every call failed the
 * flush itself fails, and the local activity's retry policy takes over (Redis or PostgreSQL away).
 */
const CALL_ATTEMPTS = 3;
const CALL_RETRY_BASE_MS = 200;

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function createBookkeepingBatchActivities(activities: BookkeepingActivities) {
  const run = (call: BookkeepingCall): Promise<unknown> => {
    // The union's members pair each kind with its own input; TypeScript cannot follow that through an index.
    const activity = activities[call.kind] as (input: BookkeepingCall['input']) => Promise<unknown>;
    return activity(call.input);
  };
  const settle = async (call: BookkeepingCall): Promise<BookkeepingSettled> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return { ok: true, value: await run(call) };
      } catch (error) {
        if (attempt >= CALL_ATTEMPTS) return { ok: false, message: error instanceof Error ? error.message : String(error) };
        await pause(CALL_RETRY_BASE_MS * 2 ** (attempt - 1));
      }
    }
  };
  return {
    async cardBookkeepingBatch(calls: readonly BookkeepingCall[]): Promise<BookkeepingSettled[]> {
      const settled = await Promise.all(calls.map(settle));
      const failed = settled.filter((s): s is Extract<BookkeepingSettled, { ok: false }> => !s.ok);
      if (calls.length > 0 && failed.length === calls.length) throw new Error(`every call of the flush failed: ${failed[0]?.message ?? ''}`);
      return settled;
    },
  };
}

export type BookkeepingBatchActivities = ReturnType<typeof createBookkeepingBatchActivities>;
