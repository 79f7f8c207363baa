/**
 * The card runs a carrierScheduler run started as children: starts under way, children not yet
 * completed, and the claims of cards whose run could not start, to release. Pure: the workflow
 * reports each start's outcome; the run continues as new only once these have settled.
 */
import { FAILED_START_RETRY_MS, STILL_RUNNING_FIRST_RETRY_MS, type ClaimRelease, type ClaimedCard } from '../../workflow-safe/claimRound.js';

/** Cards remembered with refusals in a row; beyond it the oldest is forgotten (it starts over at the first retry). */
const MAX_CARDS_REMEMBERED = 10_000;

/**
 * A claim whose child has not started is held once this share of its lease has passed since its
 * claim (or its last hold): a quarter leaves three more rounds' worth of margin on a 20 s lease
 * even when rounds come seconds late, and costs nothing while starts take under 5 s.
 */
export const HOLD_AFTER_LEASE_SHARE = 0.25;

export class ChildStarts {
  private inFlight = 0;
  // Children of this run that have not completed: an abandoned child still reports its completion
  // to this run, and a completion that arrives while the run's task continues as new makes the
  // server refuse that task (UNHANDLED_COMMAND), which evicts the run and replays its history.
  private open = 0;
  private readonly toRelease: ClaimRelease[] = [];
  // Per card, its starts refused in a row because its previous run was still open. In memory only:
  // a lost count (a new worker, the next run) only makes the next retry the first, short one.
  private readonly stillRunning = new Map<string, number>();
  private failed = 0;
  private lastClosedAt: number | undefined;
  // The claims of starts under way, by token, with when each was claimed or last held.
  private readonly waiting = new Map<string, { readonly card: ClaimedCard; heldAt: number }>();

  /** `failures`: start failures counted by the previous runs (carried over continue-as-new). */
  constructor(failures: number) {
    this.failed = failures;
  }

  /** Cards whose run could not start, in this run and the ones before (status and next run's counter). */
  get failures(): number {
    return this.failed;
  }

  /** Starts requested and not yet answered. */
  get startsInFlight(): number {
    return this.inFlight;
  }

  get childrenOpen(): number {
    return this.open;
  }

  /** Every child started has completed and no start is under way: the run may continue as new. */
  get drained(): boolean {
    return this.open === 0 && this.inFlight === 0;
  }

  /** A start was asked for, of a run for `cards` claimed at `claimedAt` (workflow time). */
  starting(cards: readonly ClaimedCard[] = [], claimedAt = 0): void {
    this.inFlight += 1;
    for (const card of cards) this.waiting.set(card.token, { card, heldAt: claimedAt });
  }

  /** A start succeeded: the child is counted open until it reports its completion. */
  started(cards: readonly ClaimedCard[] = []): void {
    this.inFlight -= 1;
    this.open += 1;
    for (const card of cards) {
      this.stillRunning.delete(card.cardId);
      this.waiting.delete(card.token);
    }
  }

  /**
   * The claims to hold in this round (lua/holdClaims.lua): those of starts still under way that
   * were claimed or last held at least HOLD_AFTER_LEASE_SHARE of `leaseMs` ago; they count as held
   * from `now` on.
   */
  claimsToHold(now: number, leaseMs: number): ClaimedCard[] {
    const due: ClaimedCard[] = [];
    for (const entry of this.waiting.values()) {
      if (now - entry.heldAt < leaseMs * HOLD_AFTER_LEASE_SHARE) continue;
      entry.heldAt = now;
      due.push(entry.card);
    }
    return due;
  }

  /** A child reported its completion, at `now` (workflow time). */
  closed(now: number): void {
    this.open -= 1;
    this.lastClosedAt = now;
  }

  /** When the last child completion arrived (undefined: none in this run). */
  get lastCompletionAt(): number | undefined {
    return this.lastClosedAt;
  }

  /**
   * A start failed: its cards' claims are to be released. `previousRunOpen`: refused because the
   * card's previous run has not closed yet — released for a short retry that doubles with each such
   * refusal in a row (STILL_RUNNING_FIRST_RETRY_MS); any other failure waits FAILED_START_RETRY_MS.
   */
  startFailed(cards: readonly ClaimedCard[], previousRunOpen = false): void {
    this.inFlight -= 1;
    this.failed += cards.length;
    for (const card of cards) this.waiting.delete(card.token);
    if (!previousRunOpen) {
      this.toRelease.push(...cards);
      return;
    }
    for (const card of cards) {
      const refusals = this.stillRunning.get(card.cardId) ?? 0;
      this.stillRunning.delete(card.cardId);
      this.stillRunning.set(card.cardId, refusals + 1);
      if (this.stillRunning.size > MAX_CARDS_REMEMBERED) this.stillRunning.delete(this.stillRunning.keys().next().value ?? '');
      this.toRelease.push({ ...card, retryAfterMs: Math.min(FAILED_START_RETRY_MS, STILL_RUNNING_FIRST_RETRY_MS * 2 ** refusals) });
    }
  }

  /** Runs the claim activity could not start (client start mode); it released their claims itself. */
  refusedByClaim(count: number): void {
    this.failed += count;
  }

  /** Claims wait to be given back (a release under way or failed keeps the loop ticking). */
  get hasReleases(): boolean {
    return this.toRelease.length > 0;
  }

  /** The claims to release now (all of them; none is kept back). */
  takeReleases(): ClaimRelease[] {
    return this.toRelease.splice(0, this.toRelease.length);
  }

  /** A release that failed: its cards are released with the next ones. */
  releaseFailed(cards: readonly ClaimRelease[]): void {
    this.toRelease.push(...cards);
  }
}
