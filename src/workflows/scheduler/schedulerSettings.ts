/**
 * carrierScheduler's input and the settings a run derives from it once, at its start: the tick,
 * the history size at which it continues as new, the cap on signals per batch. Pure.
 */
import type { RequestCheckInput } from '../../workflow-safe/requestCheck.js';
import type { TaskQueueNames } from '../../workflow-safe/taskQueues.js';
import type { InflightControlState } from '../../workflow-safe/inflightControl.js';

export interface CarrierSchedulerArgs {
  readonly carrierId: string;
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix?: string;
  /** Continue-as-new once the history has this many events (Temporal's hard limit is 51 200). */
  readonly maxHistoryEvents?: number;
  /** …or this many bytes, whichever comes first. */
  readonly maxHistoryBytes?: number;
  readonly tickMs?: number;
  /** Request-check signals handled at once, at most (the rest stay queued for the next ticks). */
  readonly maxSignalsPerTick?: number;
  /** State carried over continue-as-new. */
  readonly paused?: boolean;
  readonly rounds?: number;
  readonly pendingRequests?: readonly RequestCheckInput[];
  readonly inflightControl?: InflightControlState;
  readonly counters?: { readonly expiredLeases: number; readonly startFailures: number };
}

/**
 * A few thousand events at most: a run that must be replayed (its worker restarted, its cache entry
 * evicted) replays its whole history inside one workflow task, and on a starved CPU a 4 k-event
 * history took longer than the 10 s task timeout. The dev server suggests continue-as-new at ~4 k.
 */
export const DEFAULT_MAX_HISTORY_EVENTS = 2000;
export const DEFAULT_MAX_HISTORY_BYTES = 2 * 1024 * 1024;
/** The rollover of runs started before the drain-children patch: at 8 000 events, without waiting for children. */
export const PREVIOUS_MAX_HISTORY_EVENTS = 8000;
/**
 * Longest a run waits for the completions of the children it started before it continues as new
 * anyway. Rounds go on meanwhile (their runs started by the claim activity), so the wait costs no
 * claiming; the bound only matters for a child that runs long (its records waiting for PostgreSQL).
 */
export const CHILD_DRAIN_MAX_MS = 30_000;
/**
 * Runs from the quiet-drain patch on leave their children after CHILD_DRAIN_MAX_MS only once no
 * child has completed for this long: a completion that arrives while the task continues as new
 * makes the server refuse it (UNHANDLED_COMMAND), the run replays and tries again, and while
 * children complete one after another (a card worker killed: its runs finish on another one as
 * their tasks time out) every try was refused; meanwhile the server refused every update
 * ("Workflow Task in failed state"), request-checks included, for minutes (CI, 2026-12-02).
 */
export const CHILD_DRAIN_QUIET_MS = 5_000;
/** …and leave them in any case after this long (rounds go on meanwhile; the history grows ~6 events a round). */
export const CHILD_DRAIN_HARD_MAX_MS = 180_000;
export const DEFAULT_TICK_MS = 1000;
/** Enough for a burst of request-checks to clear in a few ticks, small enough to bound one batch's work. */
export const DEFAULT_MAX_SIGNALS_PER_TICK = 100;
/**
 * Request-check signals queued at most (new and to retry): the queue travels in the continue-as-new
 * input and in the workflow's memory, so a flood of signals (a script, a PostgreSQL outage keeping
 * them all for a retry) must not grow it without end. 1 000 requests are ~150 KB of input. A
 * signal beyond is dropped with a log line: signals are for fire-and-forget callers; the API and
 * the bulk request-check write the priority lane themselves.
 */
export const MAX_QUEUED_SIGNALS = 1000;
/** Rounds between sweeps for priority items whose retry is due (their retry delay is seconds). */
export const PRIORITY_RETRY_EVERY_ROUNDS = 5;

/** The patches a run took at its start (carrierScheduler.ts names them); each keeps its rules to the run's end. */
export interface SchedulerPatches {
  /** Continue-as-new at 2 000 events or 2 MiB, once the run's children completed; before: 8 000 events, at once. */
  readonly drainsChildren: boolean;
  /** Claim first and handle signals beside the loop, capped per batch; before: all signals before the claim. */
  readonly claimsFirst: boolean;
  /** Leave children only once they have gone quiet (CHILD_DRAIN_QUIET_MS); before: after CHILD_DRAIN_MAX_MS whatever they do. */
  readonly drainsUntilQuiet: boolean;
}

export interface SchedulerSettings extends SchedulerPatches {
  readonly tickMs: number;
  readonly maxHistoryEvents: number;
  readonly maxHistoryBytes: number;
  readonly maxSignalsPerTick: number;
}

export function schedulerSettings(args: CarrierSchedulerArgs, patches: SchedulerPatches): SchedulerSettings {
  const { drainsChildren } = patches;
  return {
    ...patches,
    tickMs: args.tickMs ?? DEFAULT_TICK_MS,
    // A run started by the previous release keeps its rollover rules to the end, or its replay would not match its history.
    maxHistoryEvents: args.maxHistoryEvents ?? (drainsChildren ? DEFAULT_MAX_HISTORY_EVENTS : PREVIOUS_MAX_HISTORY_EVENTS),
    maxHistoryBytes: args.maxHistoryBytes ?? (drainsChildren ? DEFAULT_MAX_HISTORY_BYTES : Number.POSITIVE_INFINITY),
    maxSignalsPerTick: Math.max(1, args.maxSignalsPerTick ?? DEFAULT_MAX_SIGNALS_PER_TICK),
  };
}
