/**
 * Signals, updates and queries of the workflows, defined once and shared with clients (API, CLI).
 * Wire names never change (clients and recorded histories use them); constants carry their kind as a suffix.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ControlStatus, SchedulerStatus } from '../workflow-safe/loopStatus.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import type { RequestCheckInput, RequestCheckResult } from '../workflow-safe/requestCheck.js';

export const requestCheckUpdate = defineUpdate<RequestCheckResult, [RequestCheckInput]>('requestCheck');
/** Fire-and-forget form of requestCheck for callers that cannot wait. */
export const requestCheckSignal = defineSignal<[RequestCheckInput]>('requestCheck');
/**
 * A request-check its caller served itself (the API: priority item and requestCheck.lua, the same
 * service the requestCheck activity runs): the scheduler claims at once instead of at its next tick.
 * An update, not a signal: a signal arriving as the run continues as new fails that workflow task
 * (UNHANDLED_COMMAND: 9 in a 10-minute overload window as a signal), an update is refused by the
 * closing run's validator (the next run claims the card at its first round anyway).
 */
export const priorityRequestedUpdate = defineUpdate<void, [{ cardId: string }]>('priorityRequested');
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const configChangedSignal = defineSignal('configChanged');
/** A card of the account was made due before the sleeping scheduler's wake-up (lua/wakeIfIdle.lua): claim now. */
export const wakeSignal = defineSignal('wake');
export const schedulerStatusQuery = defineQuery<SchedulerStatus>('status');

export const setModeUpdate = defineUpdate<{ mode: PollingMode; changed: boolean }, [PollingMode]>('setMode');
/** Fire-and-forget form of setMode. */
export const setModeSignal = defineSignal<[PollingMode]>('setMode');
export const reconcileUpdate = defineUpdate<{ carriers: string[] }>('reconcile');
export const reconcileSignal = defineSignal('reconcile');
export const controlStatusQuery = defineQuery<ControlStatus>('status');
