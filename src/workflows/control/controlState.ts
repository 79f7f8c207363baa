/**
 * pollingControl's state and decisions (as samples-typescript's safe-message-handlers keep a
 * loop's in a class of its own): the mode, the queue of mode switches, when to reconcile, its
 * backoff, and when to continue as new. Pure: nothing here emits a command; the workflow
 * (pollingControl.ts) wires it to the activities, child starts, timers, signals and updates.
 */
import { ApplicationFailure } from '@temporalio/common';
import { POLLING_MODES, type PollingMode } from '../../workflow-safe/pollingMode.js';
import type { ControlStatus } from '../../workflow-safe/loopStatus.js';
import type { TaskQueueNames } from '../../workflow-safe/taskQueues.js';
import { FailureStreak } from '../failureStreak.js';
import type { CarrierSchedulerArgs } from '../scheduler/schedulerSettings.js';

export interface PollingControlArgs {
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix?: string;
  /** Options passed to every scheduler (tests shorten them). */
  readonly scheduler?: Pick<CarrierSchedulerArgs, 'maxHistoryEvents' | 'tickMs'>;
  /** How often accounts are re-read even without a reconcile request. */
  readonly reconcileEveryMs?: number;
  readonly maxHistoryEvents?: number;
  /** setMode signals not yet applied, carried over continue-as-new. */
  readonly queuedModes?: readonly PollingMode[];
  /** Heartbeat timeout of the mode switch (tests shorten it); the workflow's default when absent. */
  readonly switchHeartbeatTimeoutMs?: number;
}

/**
 * Continue-as-new once the history has this many events (unless the args set another) or bytes:
 * small enough that replaying it (after a worker restart or a cache eviction) stays far inside
 * the workflow task timeout on a busy machine, as for the schedulers.
 */
export const DEFAULT_MAX_HISTORY_EVENTS = 2000;
export const DEFAULT_MAX_HISTORY_BYTES = 2 * 1024 * 1024;
/** The rollover of runs started before the smaller-history patch. */
export const PREVIOUS_MAX_HISTORY_EVENTS = 5000;
/** Accounts are re-read this often even when nobody asks for a reconcile (an account enabled in SQL). */
export const DEFAULT_RECONCILE_EVERY_MS = 60_000;
/** Backoff base of this loop's failed activities: base × 2^consecutive failures, at most 30 s (FailureStreak). */
export const FAILURE_BACKOFF_BASE_MS = 1000;

/** What the workflow knows about its own history at the end of a pass. */
export interface ControlHistoryInfo {
  readonly historyLength: number;
  readonly historySize: number;
  readonly continueAsNewSuggested: boolean;
  /** Another worker-deployment version became current for this pinned run (versionUpgrade.ts). */
  readonly targetVersionChanged: boolean;
}

/** How the loop waits after a pass: out its backoff (nothing cuts it short), or until asked, at most until the next periodic reconcile. */
export type ControlWait = { readonly kind: 'backoff'; readonly ms: number } | { readonly kind: 'untilAsked'; readonly ms: number };

export const isPollingMode = (value: unknown): value is PollingMode => POLLING_MODES.includes(value as PollingMode);

export class ControlState {
  /** The loop's failures and backoff (loopFailures adds the log and the metric). */
  readonly failures = new FailureStreak(FAILURE_BACKOFF_BASE_MS);
  private mode: PollingMode | undefined;
  private carriers: string[] = [];
  private switching = false;
  private reconcileRequested = true;
  private readonly queuedModes: PollingMode[];
  private readonly reconcileEveryMs: number;
  private maxHistoryEvents = Number.POSITIVE_INFINITY;
  private maxHistoryBytes = Number.POSITIVE_INFINITY;

  constructor(private readonly args: PollingControlArgs) {
    this.queuedModes = [...(args.queuedModes ?? [])];
    this.reconcileEveryMs = args.reconcileEveryMs ?? DEFAULT_RECONCILE_EVERY_MS;
  }

  // ---- Start of the run ----

  /** The mode read at the start; the loop begins once it has one. */
  get modeKnown(): boolean {
    return this.mode !== undefined;
  }

  modeRead(mode: PollingMode): void {
    this.mode = mode;
  }

  /** How long to wait before reading the mode again after a failed read. */
  readRetryMs(): number {
    return this.failures.backoffMs() ?? FAILURE_BACKOFF_BASE_MS;
  }

  /** The history limits, decided once (after the mode is read): a run of the previous release keeps its 5 000-event rollover and no byte limit. */
  useHistoryLimits(smallerHistory: boolean): void {
    this.maxHistoryEvents = this.args.maxHistoryEvents ?? (smallerHistory ? DEFAULT_MAX_HISTORY_EVENTS : PREVIOUS_MAX_HISTORY_EVENTS);
    this.maxHistoryBytes = smallerHistory ? DEFAULT_MAX_HISTORY_BYTES : Number.POSITIVE_INFINITY;
  }

  // ---- Messages ----

  /** setMode update's validator. */
  admitMode(target: PollingMode): void {
    if (!isPollingMode(target)) throw ApplicationFailure.nonRetryable(`mode must be "carrier" or "legacy", got ${JSON.stringify(target)}`, 'invalid_mode');
  }

  /** A setMode signal: queued when it names a mode; false when it is to be dropped. */
  queueMode(target: PollingMode): boolean {
    if (!isPollingMode(target)) return false;
    this.queuedModes.push(target);
    return true;
  }

  requestReconcile(): void {
    this.reconcileRequested = true;
  }

  status(): ControlStatus {
    return { mode: this.mode ?? 'carrier', carriers: this.carriers, switching: this.switching, ...this.failures.view() };
  }

  // ---- Mode switches: one at a time ----

  /** No switch under way: the next one may begin. */
  get switchFree(): boolean {
    return !this.switching;
  }

  switchBegun(): void {
    this.switching = true;
  }

  /** The switch to `target` succeeded: the accounts are reconciled next (schedulers of the new mode). */
  switched(target: PollingMode): void {
    this.mode = target;
    this.reconcileRequested = true;
  }

  switchEnded(): void {
    this.switching = false;
  }

  /** The queued switch to apply now: the oldest, unless none is queued or the loop is backing off. */
  nextQueuedMode(): PollingMode | undefined {
    if (this.failures.backoffMs() !== undefined) return undefined;
    return this.queuedModes[0];
  }

  /** The head of the queue was applied (a failed one stays at the head, tried again after the backoff). */
  queuedModeApplied(): void {
    this.queuedModes.shift();
  }

  // ---- Reconcile ----

  /** Whether to reconcile in this pass; the request is taken (a failed reconcile asks again). */
  takeReconcileRequest(): boolean {
    if (!this.reconcileRequested) return false;
    this.reconcileRequested = false;
    return true;
  }

  reconcileFailed(): void {
    this.reconcileRequested = true;
  }

  /** The enabled accounts the last reconcile found (each has its scheduler). */
  reconciled(carriers: string[]): void {
    this.carriers = carriers;
  }

  /** A scheduler's input: the account and the options every scheduler gets. */
  schedulerArgs(carrierId: string): CarrierSchedulerArgs {
    return { carrierId, ...this.schedulerTemplate() };
  }

  /** Every scheduler's input but its account's id. */
  schedulerTemplate(): Omit<CarrierSchedulerArgs, 'carrierId'> {
    return { taskQueues: this.args.taskQueues, workflowIdPrefix: this.args.workflowIdPrefix ?? '', ...this.args.scheduler };
  }

  // ---- Continue-as-new and the wait ----

  shouldContinueAsNew(info: ControlHistoryInfo): boolean {
    return info.historyLength >= this.maxHistoryEvents || info.historySize >= this.maxHistoryBytes || info.continueAsNewSuggested || info.targetVersionChanged;
  }

  /** The next run's input: this one's, with the mode switches not yet applied. */
  nextRunArgs(): PollingControlArgs {
    return { ...this.args, queuedModes: [...this.queuedModes] };
  }

  wait(): ControlWait {
    const backoff = this.failures.backoffMs();
    return backoff === undefined ? { kind: 'untilAsked', ms: this.reconcileEveryMs } : { kind: 'backoff', ms: backoff };
  }

  /** What ends the wait early: a reconcile asked for, or a mode switch queued. */
  asked(): boolean {
    return this.reconcileRequested || this.queuedModes.length > 0;
  }

  /** The wait ran out unasked: time for the periodic reconcile. */
  waitedOut(): void {
    this.reconcileRequested = true;
  }
}
