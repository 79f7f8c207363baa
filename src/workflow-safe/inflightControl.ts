/**
 * The adaptive in-flight limit of one carrier account: claiming bounded by
 * what the engine can run. Pure and deterministic: the scheduler workflow keeps the state and
 * feeds it one observation per claim round.
 *
 * The congestion signal is the queue lag of card executions (both server times) above the lag
 * measured with no queue: it grows when the engine backs up. For a run the claim started with the
 * client it is its creation to its first workflow task, the same for every account on the queue
 * (the start lag, from the claim, also holds the claim's start calls, more for a larger round);
 * for a child it is the start lag, its start having gone through its scheduler's history, the
 * account's own queue (src/workflows/cardExecution.ts). The start lag guards the lease. The limit
 * follows AIMD: it grows while executions start promptly and the limit is what holds the account
 * back, and shrinks by a factor when they start late. Every account reacts to the same shared
 * queue, and AIMD converges to shares proportional to the additive step, so the step is scaled
 * by the account's budget: accounts share the engine weighted by budget. For the shares to be the
 * budgets', every part of the rule scales with the budget: the first limit (up to a cap),
 * the step (a tenth of the budget, a fraction of an execution for a small account: the limit is
 * kept as a real number, the claim gets its whole part) and the cuts (factors). Whole steps of
 * at least one (1, 2, 3 for budgets 8, 17, 33 QPS) and first limits of min(10, max(budget, 4))
 * (8, 10, 10) made the overload bench's shares 1.35 / 1.27 / 0.78 of those budgets' shares in
 * client start mode (2026-12-02).
 */

/**
 * Queueing delay (mean start lag above the learned base lag) above which the engine is behind: shrink.
 * The base lag is what an execution takes to start with no queue — measured ~1–2 s on an idle dev
 * server — so it must not count as congestion.
 */
export const QUEUE_DELAY_HIGH_MS = 2000;
/** Queueing delay below which executions start promptly: slow start may keep doubling. */
export const QUEUE_DELAY_LOW_MS = 500;
/** Floor of the limit: an account always has a few executions in flight (the priority lane needs room). */
export const MIN_INFLIGHT_LIMIT = 2;
const DECREASE_FACTOR = 0.7;
/** Far behind (queue delay above 4× the threshold): halve instead. */
const STEEP_DECREASE_FACTOR = 0.5;
/** Rounds to wait after a decrease before the next one: the effect of a cut shows a round later. */
const DECREASE_HOLD_ROUNDS = 1;
/**
 * Where slow start begins, per QPS of budget, up to {@link INITIAL_LIMIT_CAP}: a few rounds of
 * doubling reach any limit the engine can carry, and accounts start in the ratio of their budgets.
 */
const INITIAL_LIMIT_PER_QPS = 0.5;
/** Above it, a large account's first round would hand the engine a backlog (leases expire in its queue). */
const INITIAL_LIMIT_CAP = 10;
/** The additive step per round, per QPS of budget. */
const STEP_PER_QPS = 0.1;
/**
 * …at most this share of the limit (and at least one execution): an account whose budget is far
 * above what the engine runs (5 000 QPS in the bench's capacity measurement: a step of 500) would
 * go from a limit of 10 to its configured 200 in one round, before any of those runs could show
 * the queue they make. Below the bound (a step of a tenth of the budget on a limit of 2.5
 * budget-seconds or more) nothing changes.
 */
const MAX_STEP_SHARE = 0.25;
/** Weight of the newest round in the smoothed rates. */
const EWMA_ALPHA = 0.3;
/**
 * The base lag is the lowest mean lag seen, drifting up by this much per round so that a lasting
 * change of the no-queue lag (another machine, a busier server) is learnt within a minute or so.
 */
const BASE_LAG_DRIFT_MS = 20;
/** No lag above this counts as "no queue", whatever was learnt: a start this slow is a backlog. */
const BASE_LAG_CAP_MS = 2000;
/**
 * Part of the lease a claim may spend waiting to start. Beyond it the limit drops at once to what
 * the engine started last round (no hold): leases must not expire because of an engine backlog.
 */
const LEASE_WAIT_SHARE = 0.25;
/**
 * Around the account's fair rate of a saturated engine (src/workflow-safe/engineShare.ts): growth
 * stops at it, a cut comes at 5 % above, to the fair rate's proportion of the limit (at most the
 * usual decrease), then holds for {@link SHARE_HOLD_ROUNDS} rounds while the smoothed rate follows
 * the smaller limit; between the two nothing changes, so the rates' noise does not set off cuts.
 * Growth and cut at 1.05 and 1.1 left the smaller accounts at the band's top, 1.11 of their budget
 * shares (overload bench, child mode), and the largest below. Fair rates apply only while the
 * engine queues someone's runs, so stopping at them does not freeze a ramp on an idle engine.
 */
const SHARE_GROW_BELOW = 1.0;
const SHARE_CUT_ABOVE = 1.05;
const SHARE_HOLD_ROUNDS = 3;

/**
 * `ingest`: the in-flight set is full at the limit ingest backpressure cut it to (src/ingest/pressure.ts).
 * Not binding for the adaptive limit: it says nothing about the engine, and growing the adaptive
 * limit meanwhile would both weaken the backpressure and leave a limit nobody measured.
 */
export type LimitingFactor = 'none' | 'budget' | 'inflight' | 'orchestration' | 'ingest';

export interface InflightControlState {
  /** A real number: the in-flight cap a claim gets is its whole part ({@link inflightLimitOf}). */
  readonly limit: number;
  /** Doubling until the first sign of congestion (slow start), then additive growth. */
  readonly slowStart: boolean;
  readonly holdRounds: number;
  /** Smoothed execution starts per second. */
  readonly startsPerSec: number;
  /** Smoothed mean start lag (claim to first task). */
  readonly startLagMs: number;
  /** Smoothed mean queue lag (run creation to first task); absent from states of older code. */
  readonly queueLagMs?: number;
  /** Learnt queue lag with no queue (null until the first start); see BASE_LAG_DRIFT_MS. */
  readonly baseLagMs: number | null;
  /**
   * The lowest mean queue lag of a round seen (no drift, unlike the base lag): the engine with no
   * queue at all. Absent from states of older code.
   */
  readonly lowestLagMs?: number | null;
  /** Smoothed starts per second measured while the engine was the limit; null until then. */
  readonly capacityPerSec: number | null;
}

export interface RoundObservation {
  /** Executions of the account that started since the previous round, and their summed start lag. */
  readonly starts: number;
  readonly lagSumMs: number;
  /** Of those, the ones that reported their queue lag, and its sum (absent: the start lag stands in). */
  readonly queueStarts?: number;
  readonly queueLagSumMs?: number;
  readonly elapsedMs: number;
  /** What held the round back (from the claim): only a binding limit may grow. */
  readonly limitedBy: LimitingFactor;
  /** Configured in-flight limit of the account, bounded by the deployment's card capacity. */
  readonly maxLimit: number;
  /** The account's total budget (QPS): the first limit is half of it, the additive step a tenth. */
  readonly budgetQps: number;
  /** The account's claim lease: a start lag near it means claims expire before they run. */
  readonly leaseMs: number;
  /** Its fair execution rate while the engine is shared and saturated (absent or null: no such bound). */
  readonly fairRatePerSec?: number | null;
}

/**
 * The engine queues this account's runs: its smoothed queue lag is {@link QUEUE_DELAY_LOW_MS} or
 * more above the lowest it has seen. Only then does an account held back by its adaptive limit
 * want more of a saturated engine (src/workflow-safe/engineShare.ts): accounts ramping up on an
 * idle engine are held back by their limits too, and fair rates among them would freeze their sum
 * where it stands. Against the lowest lag, not the drifting base: under a lasting overload the base
 * climbs to the queue's lag.
 */
export function engineQueues(state: InflightControlState): boolean {
  const lowest = state.lowestLagMs ?? state.baseLagMs;
  if (lowest === null) return false;
  return (state.queueLagMs ?? state.startLagMs) - lowest >= QUEUE_DELAY_LOW_MS;
}

export function initialInflightControl(maxLimit: number, budgetQps: number): InflightControlState {
  return {
    // Starting at the configured limit would hand a backlog to the engine in the first round.
    limit: clamp(Math.min(budgetQps * INITIAL_LIMIT_PER_QPS, INITIAL_LIMIT_CAP), maxLimit),
    slowStart: true,
    holdRounds: 0,
    startsPerSec: 0,
    startLagMs: 0,
    queueLagMs: 0,
    baseLagMs: null,
    capacityPerSec: null,
  };
}

function clamp(limit: number, maxLimit: number): number {
  return Math.max(MIN_INFLIGHT_LIMIT, Math.min(limit, Math.max(MIN_INFLIGHT_LIMIT, maxLimit)));
}

/** The cards the account may have in flight now: the whole part of the adaptive limit. */
export function inflightLimitOf(state: InflightControlState): number {
  return Math.floor(state.limit);
}

const smooth = (previous: number, value: number): number => previous + EWMA_ALPHA * (value - previous);

/** Longest hold after a lease-guard cut, in rounds. */
const MAX_LAG_HOLD_ROUNDS = 10;
/** Rounds a start lag of `lagMs` spans (at least the usual hold, at most MAX_LAG_HOLD_ROUNDS). */
const lagRounds = (lagMs: number, roundMs: number): number =>
  Math.min(MAX_LAG_HOLD_ROUNDS, Math.max(DECREASE_HOLD_ROUNDS, Math.ceil(lagMs / Math.max(roundMs, 1))));

export function nextInflightControl(state: InflightControlState, round: RoundObservation): InflightControlState {
  const seconds = Math.max(round.elapsedMs, 1) / 1000;
  const rate = round.starts / seconds;
  const meanLag = round.starts > 0 ? round.lagSumMs / round.starts : null;
  const queueStarts = round.queueStarts ?? 0;
  const meanQueueLag = queueStarts > 0 ? (round.queueLagSumMs ?? 0) / queueStarts : meanLag;
  const startsPerSec = smooth(state.startsPerSec, rate);
  const startLagMs = meanLag === null ? state.startLagMs : smooth(state.startLagMs, meanLag);
  const previousQueueLag = state.queueLagMs ?? state.startLagMs;
  const queueLagMs = meanQueueLag === null ? previousQueueLag : smooth(previousQueueLag, meanQueueLag);
  // (A state carried over from a run without a base lag reads as none yet.)
  const previousBase = state.baseLagMs ?? null;
  const baseLagMs = meanQueueLag === null ? previousBase : Math.min(previousBase === null ? meanQueueLag : previousBase + BASE_LAG_DRIFT_MS, meanQueueLag);
  const holdRounds = Math.max(0, state.holdRounds - 1);
  const lowestLagMs = meanQueueLag === null ? (state.lowestLagMs ?? null) : Math.min(state.lowestLagMs ?? meanQueueLag, meanQueueLag);
  const base = { ...state, startsPerSec, startLagMs, queueLagMs, baseLagMs, lowestLagMs, holdRounds };
  const queueDelay = meanQueueLag === null ? null : meanQueueLag - Math.min(baseLagMs ?? 0, BASE_LAG_CAP_MS);

  if (meanLag !== null && meanLag > round.leaseMs * LEASE_WAIT_SHARE) {
    // Claims wait a good part of their lease to start: keep no more in flight than the engine
    // runs in a round, at once, whatever the hold. Halved once per backlog: the runs starting
    // late in the rounds after a cut were claimed before it, and halving again at each of them
    // took the bench's capacity accounts from 21 to 2 in four rounds while the engine still ran
    // 20 of theirs a round (card executions 22/s against 33 before). The hold lasts as many
    // rounds as the lag is long, the time the cut takes to show.
    const capacityPerSec = state.capacityPerSec === null ? rate : smooth(state.capacityPerSec, rate);
    const held = state.holdRounds > 0;
    const cut = held ? state.limit : clamp(state.limit * STEEP_DECREASE_FACTOR, round.maxLimit);
    const engineRuns = Math.max(round.starts, startsPerSec * seconds);
    const limit = Math.max(MIN_INFLIGHT_LIMIT, Math.min(cut, engineRuns));
    return { ...base, capacityPerSec, slowStart: false, holdRounds: held ? holdRounds : lagRounds(meanLag, round.elapsedMs), limit };
  }
  if (queueDelay !== null && queueDelay > QUEUE_DELAY_HIGH_MS) {
    // What started this round is what the engine could run for this account: its capacity.
    const capacityPerSec = state.capacityPerSec === null ? rate : smooth(state.capacityPerSec, rate);
    if (state.holdRounds > 0) return { ...base, capacityPerSec };
    const factor = queueDelay > 4 * QUEUE_DELAY_HIGH_MS ? STEEP_DECREASE_FACTOR : DECREASE_FACTOR;
    return { ...base, capacityPerSec, slowStart: false, holdRounds: DECREASE_HOLD_ROUNDS, limit: clamp(state.limit * factor, round.maxLimit) };
  }
  const fairRate = round.fairRatePerSec ?? null;
  if (fairRate !== null && startsPerSec > fairRate * SHARE_CUT_ABOVE) {
    // Well above its share of a saturated engine: others wait for what this account runs.
    if (state.holdRounds > 0) return base;
    const factor = Math.max(DECREASE_FACTOR, fairRate / startsPerSec);
    return { ...base, slowStart: false, holdRounds: SHARE_HOLD_ROUNDS, limit: clamp(state.limit * factor, round.maxLimit) };
  }
  const belowShare = fairRate === null || startsPerSec < fairRate * SHARE_GROW_BELOW;
  const binding = belowShare && (round.limitedBy === 'orchestration' || round.limitedBy === 'inflight');
  // Growth needs evidence: executions of this account that started since the last round. Without
  // it (the first claims have not started yet) a larger limit would only pile onto an unknown backlog.
  if (binding && queueDelay !== null && state.limit < round.maxLimit) {
    // Below the threshold the limit keeps probing upwards (additively), so accounts converge to
    // their budget-weighted shares instead of freezing wherever they were; doubling only while
    // executions start promptly and the current limit was mostly exercised.
    const step = Math.min(round.budgetQps * STEP_PER_QPS, Math.max(1, state.limit * MAX_STEP_SHARE));
    const doubling = state.slowStart && queueDelay < QUEUE_DELAY_LOW_MS && round.starts >= inflightLimitOf(state) / 2;
    const grown = doubling ? Math.max(state.limit * 2, state.limit + step) : state.limit + step;
    // Below its fair rate: at most the limit that runs the fair rate at the current rate per slot.
    // A whole step overshot it for a small account (a tenth of the budget is a sixth of its limit),
    // and one cut per hold period did not undo four rounds of steps: the smaller accounts ran at
    // 1.16-1.2x their fair rates (overload bench, child mode).
    const towardShare = fairRate !== null && startsPerSec > 0 ? Math.max(state.limit, Math.min(grown, (state.limit * fairRate) / startsPerSec)) : grown;
    return { ...base, limit: clamp(towardShare, round.maxLimit) };
  }
  // The configured limit may have been lowered since the last round.
  return { ...base, limit: clamp(state.limit, round.maxLimit) };
}

/**
 * Why the account claimed no more this round: nothing else was due (`none`), the budget ran out,
 * or the in-flight set is full — by the account's configured limit (`inflight`) or because the
 * adaptive limit is below it (`orchestration`: the engine is what holds it back).
 */
export function limitingFactor(input: { dueLeft: number; running: number; limit: number; adaptiveLimit: number; maxLimit: number }): LimitingFactor {
  if (input.dueLeft === 0) return 'none';
  if (input.running >= input.limit) return input.adaptiveLimit < input.maxLimit ? 'orchestration' : 'inflight';
  return 'budget';
}
