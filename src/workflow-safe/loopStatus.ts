/** What the long-running loops (pollingControl, carrierScheduler) report through their status queries. Workflow-safe. */
import type { LimitingFactor } from './inflightControl.js';
import type { GroupBudgetView } from './claimRound.js';
import type { PollingMode } from './pollingMode.js';

/** The account's orchestration view: what limits it now and what the engine runs for it. */
export interface OrchestrationView {
  readonly limitedBy: LimitingFactor;
  readonly inflightLimit: number;
  readonly configuredInflightLimit: number;
  readonly startsPerSec: number;
  readonly startLagMs: number;
  /** Run creation to first task: the engine's queue alone. Absent from schedulers started by older code. */
  readonly queueLagMs?: number;
  /** Queue lag with no queue (learnt); the part of queueLagMs above it is queueing. Null until measured. */
  readonly baseLagMs: number | null;
  /** Executions/s the engine sustained for this account while it was the limit; null until measured. */
  readonly capacityPerSec: number | null;
  /** Its fair execution rate of a saturated engine shared with other accounts (src/workflow-safe/engineShare.ts); absent when none. */
  readonly fairRatePerSec?: number;
}

/** The counter of the control loops' failed activities (the workflows' and the claim loop activities'). */
export const LOOP_FAILURES_METRIC = 'cardpoller_loop_activity_failures';
export const LOOP_FAILURES_HELP = 'Failed activities of the control loops (retried with backoff)';

/** The last failure of a loop's activity (the loop backs off and keeps going). */
export interface LoopFailure {
  readonly activity: string;
  readonly message: string;
  /** Workflow time of the failure (ISO). */
  readonly at: string;
  /** Failures in a row; 0 once the activity succeeds again. */
  readonly consecutive: number;
}

export interface SchedulerStatus {
  readonly carrierId: string;
  readonly paused: boolean;
  /** `degraded`: the claim (or another activity) keeps failing; the loop retries with backoff. */
  readonly mode: 'claiming' | 'idle' | 'degraded';
  readonly rounds: number;
  readonly running: number;
  readonly claimedLastTick: number;
  readonly expiredLeases: number;
  readonly startFailures: number;
  readonly lanes: { readonly priority: number; readonly normal: number };
  readonly groups: readonly GroupBudgetView[];
  readonly orchestration: OrchestrationView;
  readonly lastFailure?: LoopFailure;
}

export interface ControlStatus {
  readonly mode: PollingMode;
  readonly carriers: readonly string[];
  readonly switching: boolean;
  readonly lastFailure?: LoopFailure;
}
