/**
 * SCHEDULER_LOOP=activity: an account's claim loop runs as one long, heartbeating activity per lap
 * instead of one workflow task, local activity and timer per round (docs/design.md, 'The claim
 * loop as an activity'). What carrierScheduler and the activity (src/activities/claimLoop.ts)
 * exchange. Workflow-safe.
 */
import type { CarrierSchedulerArgs } from '../workflows/scheduler/schedulerSettings.js';
import type { InflightControlState } from './inflightControl.js';

/** `workflow`: a claim round per workflow task (the default); `activity`: a claim loop activity per account. */
export type SchedulerLoop = 'workflow' | 'activity';
export const SCHEDULER_LOOPS: readonly SchedulerLoop[] = ['workflow', 'activity'];

/** The task queue of the claim loop activities: their own worker and slots, so that loops never take the control queue's. */
export const claimLoopTaskQueue = (controlQueue: string): string => `${controlQueue}-claim-loops`;

/**
 * How long one lap runs before it hands back to its workflow, which then checks its version and
 * history and starts the next lap: a workflow task every 10 minutes per account.
 */
export const CLAIM_LOOP_LAP_MS = 600_000;
/**
 * A loop whose worker died is noticed after this long and started again elsewhere. The SDK sends
 * heartbeats at 0.8 × this at most (one Temporal action each: 0.02 per second per account).
 */
export const CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS = 60_000;

export interface ClaimLoopInput {
  /** The scheduler run's input as it stands (tick, queues, rounds and in-flight state carried). */
  readonly scheduler: CarrierSchedulerArgs;
  readonly workflowId: string;
  readonly runId: string;
  /** `<run id>~<lap>`: owns the account's claiming while it runs (the `loop` key; a newer one supersedes it). */
  readonly generation: string;
  readonly lapMs: number;
}

/** How a lap ended: the account stopped (disabled, gone), or the lap is over with the state the next one carries. */
export type ClaimLoopLap =
  | { readonly kind: 'stop'; readonly reason: string }
  | {
      readonly kind: 'lap';
      /**
       * `lap` (its time is up), `superseded` (a newer loop owns the account, or it was stopped),
       * `cancelled` (worker shutdown), `versionChanged` (another worker-deployment version became
       * current: the scheduler continues as new onto it).
       */
      readonly ended: 'lap' | 'superseded' | 'cancelled' | 'versionChanged';
      readonly rounds: number;
      readonly inflightControl?: InflightControlState;
      readonly counters: { readonly expiredLeases: number; readonly startFailures: number };
    };
