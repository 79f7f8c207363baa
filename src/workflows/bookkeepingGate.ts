/**
 * The bookkeeping of a `cardBatch` run's cards, gathered: a card's call (prepare, release, finish,
 * record) waits until every card still executing is waiting on one too, and then all of them go
 * to the worker as one local activity (`cardBookkeepingBatch`). The cards' gateway steps stay
 * their own local activities, concurrent. A batch of cards that all run one type so costs about
 * one marker per card (its gateway step) plus three for the whole batch (prepare, finish, record),
 * instead of four per card. Workflow code: deterministic (no clock, no I/O; the flush decision
 * depends only on the order in which the cards reach their calls).
 *
 * What it delays: a card that finishes its steps early waits for the others' steps before its
 * finish is sent — at most the account's total timeout, well inside the lease.
 */
import { patched, proxyLocalActivities } from '@temporalio/workflow';
import type { FinishRetrySettings } from '../workflow-safe/cardRun.js';
import { FINISH_LASTING_PATCH, firstFinishRetry, retryLasting } from './finishRetry.js';
import { recordWriters } from './cardExecution.js';
import type {
  BookkeepingActivities,
  BookkeepingBatchActivities,
  BookkeepingCall,
  BookkeepingKind,
  BookkeepingSettled,
} from '../activities/bookkeepingBatch.js';

/** What `executeCard` calls for a card's bookkeeping: the per-card local activities, or a gate's port. */
export type CardBookkeeping = BookkeepingActivities;

/** Bookkeeping flushes retry as a card's own bookkeeping does (bounded: the claim is then released or left to its lease). */
const FLUSH_RETRY = { initialInterval: '200 ms', backoffCoefficient: 2, maximumInterval: '5 s', maximumAttempts: 20 } as const;
/** Flushes of records only retry without limit, as a card's record does: waiting for PostgreSQL holds no claim. */
const RECORD_FLUSH_RETRY = { initialInterval: '1 s', backoffCoefficient: 2, maximumInterval: '1 minute' } as const;
const RECORD_KINDS: ReadonlySet<BookkeepingKind> = new Set(['recordExecution', 'enqueueRecord']);
/**
 * Runs from this patch on retry a card's record that failed inside a flush (its 3 tries there) on
 * its own, without limit, as `cardCheck` retries its record: before, the card failed in its batch
 * and what its check learned — execution row, observations, alerts, its priority item's end — was
 * lost, although Redis had already moved its due time on (issue 46).
 */
const RECORD_OWN_RETRY_PATCH = 'batch-record-own-retry';

/** The finish retry settings of a flush's finishes (undefined: their defaults), or null when it carries none. */
function finishRetrySettings(flush: readonly Waiting[]): FinishRetrySettings | undefined | null {
  for (const { call } of flush) if (call.kind === 'finishExecution') return call.input.plan.finishRetry;
  return null;
}
/** Longest summary line: the Web UI shows one line per event. */
const SUMMARY_MAX_CHARS = 200;

interface Waiting {
  readonly call: BookkeepingCall;
  readonly cardId: string;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

export class BookkeepingGate {
  private active: number;
  private readonly waiting: Waiting[] = [];

  /** `cards`: how many cards execute under this gate; each calls {@link leave} once when done. */
  constructor(cards: number) {
    this.active = cards;
  }

  /** The bookkeeping port of one card of the batch. */
  port(cardId: string): CardBookkeeping {
    return {
      prepareExecution: (input) => this.call('prepareExecution', input, cardId),
      releaseClaim: (input) => this.call('releaseClaim', input, cardId),
      finishNotPolled: (input) => this.call('finishNotPolled', input, cardId),
      finishExecution: (input) => this.call('finishExecution', input, cardId),
      recordExecution: (input) => this.call('recordExecution', input, cardId),
      enqueueRecord: (input) => this.call('enqueueRecord', input, cardId),
    };
  }

  /** A card's execution has ended (however): the others no longer wait for it. */
  leave(): void {
    this.active -= 1;
    this.flushWhenAllWait();
  }

  private call<K extends BookkeepingKind>(kind: K, input: Parameters<BookkeepingActivities[K]>[0], cardId: string): ReturnType<BookkeepingActivities[K]> {
    const pending = new Promise<unknown>((resolve, reject) => {
      // The union pairs each kind with its own input, which a generic cannot express to TypeScript.
      this.waiting.push({ call: { kind, input } as BookkeepingCall, cardId, resolve, reject });
    });
    this.flushWhenAllWait();
    return pending as ReturnType<BookkeepingActivities[K]>;
  }

  /** A card calls one thing at a time, so as many waiting calls as cards executing means every card waits. */
  private flushWhenAllWait(): void {
    if (this.waiting.length === 0 || this.waiting.length < this.active) return;
    const flush = this.waiting.splice(0, this.waiting.length);
    const recordsOnly = flush.every((w) => RECORD_KINDS.has(w.call.kind));
    const kinds = [...new Set(flush.map((w) => w.call.kind))].join(', ');
    const summary = `${kinds}: card${flush.length > 1 ? 's' : ''} ${flush.map((w) => w.cardId).join(', ')}`;
    // A flush carrying finishes retries as a card's own finish does (src/workflows/finishRetry.ts).
    const finishRetry = finishRetrySettings(flush);
    const retry = recordsOnly ? RECORD_FLUSH_RETRY : finishRetry === null ? FLUSH_RETRY : { ...FLUSH_RETRY, ...firstFinishRetry(finishRetry) };
    const activities = proxyLocalActivities<BookkeepingBatchActivities>({
      startToCloseTimeout: '1 minute',
      localRetryThreshold: '10 s',
      retry,
      summary: summary.length > SUMMARY_MAX_CHARS ? `${summary.slice(0, SUMMARY_MAX_CHARS - 1)}…` : summary,
    });
    const calls = flush.map((w) => w.call);
    void activities.cardBookkeepingBatch(calls).then(
      (settled) => settle(flush, settled),
      async (error: unknown) => {
        // Finishes that failed the short policy (Redis away longer) are tried again under the
        // lasting one before their cards hear of it; a history recorded before failed them here.
        const lasting =
          finishRetry !== null && patched(FINISH_LASTING_PATCH) ? await retryLasting(() => activities.cardBookkeepingBatch(calls), finishRetry) : undefined;
        if (lasting !== undefined) settle(flush, lasting);
        else for (const waiting of flush) failed(waiting, error instanceof Error ? error : new Error(String(error)));
      },
    );
  }
}

/** Each call's outcome to the card that made it. */
function settle(flush: readonly Waiting[], settled: readonly BookkeepingSettled[]): void {
  for (const [index, waiting] of flush.entries()) {
    const outcome = settled[index];
    if (outcome?.ok) waiting.resolve(outcome.value);
    else failed(waiting, new Error(outcome ? outcome.message : 'no result for this call in the flush'));
  }
}

/** A call the flush could not make: a record is tried again on its own, without limit (see RECORD_OWN_RETRY_PATCH); anything else fails its card. */
function failed(waiting: Waiting, error: Error): void {
  const { call } = waiting;
  if ((call.kind !== 'recordExecution' && call.kind !== 'enqueueRecord') || !patched(RECORD_OWN_RETRY_PATCH)) {
    waiting.reject(error);
    return;
  }
  const writers = recordWriters(`${call.kind}: card ${waiting.cardId}, again on its own`);
  const written = call.kind === 'recordExecution' ? writers.recordExecution(call.input) : writers.enqueueRecord(call.input);
  written.then(
    (value) => waiting.resolve(value),
    (error: unknown) => waiting.reject(error instanceof Error ? error : new Error(String(error))),
  );
}
