/** Inputs for the scheduler state's unit tests: args, claim results, requests. */
import type { ClaimedCard } from '../../../src/workflow-safe/claimRound.js';
import type { RequestCheckInput } from '../../../src/workflow-safe/requestCheck.js';
import type { TaskQueueNames } from '../../../src/workflow-safe/taskQueues.js';
import { SchedulerState, type HistoryInfo } from '../../../src/workflows/scheduler/schedulerState.js';
import type { CarrierSchedulerArgs, SchedulerPatches } from '../../../src/workflows/scheduler/schedulerSettings.js';

export const QUEUES: TaskQueueNames = { control: 'ctl', card: 'card', cardPriority: 'card-prio', gateway: 'gw', ingest: 'ing' };
export const RUN = { workflowId: 'carrier-scheduler-7', runId: 'run1' };
/** Runs of the current release: both patches taken. */
export const CURRENT: SchedulerPatches = { drainsChildren: true, claimsFirst: true, drainsUntilQuiet: true };
/** Runs started before both patches. */
export const UNPATCHED: SchedulerPatches = { drainsChildren: false, claimsFirst: false, drainsUntilQuiet: false };

export const schedulerArgs = (extra: Partial<CarrierSchedulerArgs> = {}): CarrierSchedulerArgs => ({ carrierId: '7', taskQueues: QUEUES, ...extra });

export const newState = (extra: Partial<CarrierSchedulerArgs> = {}, patches: SchedulerPatches = CURRENT): SchedulerState =>
  new SchedulerState(schedulerArgs(extra), RUN, patches);

export const card = (id: string, fromPriority = false): ClaimedCard => ({ cardId: id, token: `run1.1@0:${id}`, fromPriority });

export const request = (cardId: string, actor = 'test'): RequestCheckInput => ({ cardId, types: ['card_status'], lane: 'priority', actor });

export { claimedRound as claimed } from '../../../testkit/claimRounds.js';

/** A history below every limit, with `extra` changed. */
export const history = (extra: Partial<HistoryInfo> = {}): HistoryInfo => ({
  historyLength: 100,
  historySize: 10_000,
  continueAsNewSuggested: false,
  targetVersionChanged: false,
  ...extra,
});
