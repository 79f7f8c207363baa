/**
 * The paths the recorded histories cover, and what makes a history one of them: the events and
 * decisions that only that path produces. scripts/recordHistories.ts picks, among the runs it
 * provoked, one whose history passes the check; test/replay/replay.test.ts checks every stored
 * history again (a history re-recorded into something else fails there) before replaying it.
 */
import type proto from '@temporalio/proto';
import { eventTypeName } from './recorded.js';

type History = proto.temporal.api.history.v1.IHistory;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;
type Payloads = proto.temporal.api.common.v1.IPayloads;

/** A local activity's marker: its type, result and whether it failed (after its retries). */
export interface LocalActivityMarker {
  readonly eventIndex: number;
  readonly activityType: string;
  readonly result: unknown;
  readonly failed: boolean;
  /** Attempts the marker covers (a local activity's retries inside its local retry threshold). */
  readonly attempt: number;
}

/** An activity task the run scheduled, and how it ended. */
export interface ScheduledActivity {
  readonly eventIndex: number;
  readonly activityType: string;
  readonly input: unknown;
  readonly heartbeatTimeoutMs: number;
  /** The attempt that closed it (its started event's), when it was started. */
  readonly attempt?: number;
  readonly closed?: {
    readonly eventIndex: number;
    readonly type: string;
    readonly failureType?: string;
    readonly nonRetryable?: boolean;
    /** What a completed activity returned. */
    readonly result?: unknown;
  };
}

const decodeFirst = (payloads: Payloads | null | undefined): unknown => {
  const data = payloads?.payloads?.[0]?.data;
  return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as unknown) : undefined;
};

const field = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);

/** What a history shows, read without the workflow code. */
export class HistoryView {
  readonly events: readonly HistoryEvent[];
  readonly types: readonly string[];
  constructor(history: History) {
    this.events = history.events ?? [];
    this.types = this.events.map(eventTypeName);
  }
  count(type: string): number {
    return this.types.filter((t) => t === type).length;
  }
  get lastType(): string | undefined {
    return this.types.at(-1);
  }
  /** This run's id (the started event's original execution run id). */
  get runId(): string {
    return this.events[0]?.workflowExecutionStartedEventAttributes?.originalExecutionRunId ?? '';
  }
  get input(): unknown {
    return decodeFirst(this.events[0]?.workflowExecutionStartedEventAttributes?.input);
  }
  get result(): unknown {
    return decodeFirst(this.events.at(-1)?.workflowExecutionCompletedEventAttributes?.result);
  }
  /** The next run's input, when this run continued as new. */
  get continuedInput(): unknown {
    return decodeFirst(this.events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.input);
  }
  /** Activity tasks in the order scheduled, each with its end (completed, failed, …) when the history has it. */
  scheduledActivities(): ScheduledActivity[] {
    const scheduled = new Map<number, ScheduledActivity>();
    const order: number[] = [];
    this.events.forEach((e, eventIndex) => {
      const attributes = e.activityTaskScheduledEventAttributes;
      if (attributes) {
        const timeout = attributes.heartbeatTimeout;
        scheduled.set(Number(e.eventId), {
          eventIndex,
          activityType: attributes.activityType?.name ?? '',
          input: decodeFirst(attributes.input),
          heartbeatTimeoutMs: Number(timeout?.seconds ?? 0) * 1000 + Math.round((timeout?.nanos ?? 0) / 1e6),
        });
        order.push(Number(e.eventId));
        return;
      }
      const started = e.activityTaskStartedEventAttributes;
      const ended =
        e.activityTaskCompletedEventAttributes ??
        e.activityTaskFailedEventAttributes ??
        e.activityTaskTimedOutEventAttributes ??
        e.activityTaskCanceledEventAttributes;
      const id = Number((started ?? ended)?.scheduledEventId ?? 0);
      const activity = scheduled.get(id);
      if (!activity) return;
      if (started) scheduled.set(id, { ...activity, attempt: started.attempt ?? 0 });
      else {
        const failure = e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo;
        const completed = e.activityTaskCompletedEventAttributes;
        scheduled.set(id, {
          ...activity,
          closed: {
            eventIndex,
            type: eventTypeName(e),
            ...(failure ? { failureType: failure.type ?? '', nonRetryable: failure.nonRetryable === true } : {}),
            ...(completed ? { result: decodeFirst(completed.result) } : {}),
          },
        });
      }
    });
    return order.flatMap((id) => {
      const activity = scheduled.get(id);
      return activity ? [activity] : [];
    });
  }
  /** The search attributes each upsert set, by name (patched() sets TemporalChangeVersion). */
  upserts(): string[][] {
    return this.events.flatMap((e) => {
      const fields = e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
      return fields ? [Object.keys(fields)] : [];
    });
  }
  activities(): string[] {
    return this.events.flatMap((e) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name ? [e.activityTaskScheduledEventAttributes.activityType.name] : [],
    );
  }
  failedActivities(): number {
    return this.count('ACTIVITY_TASK_FAILED');
  }
  localActivities(): LocalActivityMarker[] {
    return this.events.flatMap((e, eventIndex) => {
      const marker = e.markerRecordedEventAttributes;
      if (marker?.markerName !== 'core_local_activity') return [];
      const data = decodeFirst(marker.details?.data);
      return [
        {
          eventIndex,
          activityType: String(field(data, 'activity_type')),
          result: decodeFirst(marker.details?.result),
          failed: Boolean(marker.failure),
          attempt: Number(field(data, 'attempt') ?? 0),
        },
      ];
    });
  }
  patches(): string[] {
    return this.events.flatMap((e) => {
      const marker = e.markerRecordedEventAttributes;
      return marker?.markerName === 'core_patch' ? [String(field(decodeFirst(marker.details?.['patch-data']), 'id'))] : [];
    });
  }
  childStarts(): { eventIndex: number; workflowType: string; taskQueue: string }[] {
    return this.events.flatMap((e, eventIndex) => {
      const start = e.startChildWorkflowExecutionInitiatedEventAttributes;
      return start ? [{ eventIndex, workflowType: start.workflowType?.name ?? '', taskQueue: start.taskQueue?.name ?? '' }] : [];
    });
  }
  /** Timers in order: event index and duration. */
  timers(): { eventIndex: number; ms: number }[] {
    return this.events.flatMap((e, eventIndex) => {
      const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
      return timeout ? [{ eventIndex, ms: Number(timeout.seconds ?? 0) * 1000 + Math.round((timeout.nanos ?? 0) / 1e6) }] : [];
    });
  }
  updatesAccepted(): string[] {
    return this.events.flatMap((e) => {
      const name = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name;
      return name ? [name] : [];
    });
  }
  signals(): string[] {
    return this.events.flatMap((e) => (e.workflowExecutionSignaledEventAttributes?.signalName ? [e.workflowExecutionSignaledEventAttributes.signalName] : []));
  }
}

export interface ReplayPath {
  readonly workflowType: string;
  readonly description: string;
  /** What the history lacks to be this path; empty when it is. */
  check(view: HistoryView): string[];
}

const need = (problems: string[], ok: boolean, what: string): void => {
  if (!ok) problems.push(what);
};

/** Patch ids the workflows mark their changes with (src/workflows/carrierScheduler.ts, src/workflows/finishRetry.ts). */
const DRAIN_CHILDREN = 'scheduler-drain-children';
const CLAIM_BEFORE_SIGNALS = 'scheduler-claim-before-signals';
const WAKE_ON_ANY_TASK = 'scheduler-wake-on-any-task';
const FINISH_LASTING = 'card-finish-retry-lasting';
/** The search attribute patched() records its change ids in; not one the workflow sets. */
const CHANGE_VERSION_ATTRIBUTE = 'TemporalChangeVersion';
const DEFAULT_TICK_MS = 1000;

const outcomeOf = (view: HistoryView): unknown => field(view.result, 'outcome');
const stepOutcomes = (view: HistoryView): unknown[] =>
  view.localActivities().flatMap((m) => (m.activityType === 'checkGateway' ? [m.result === 'lease_lost' ? 'lease_lost' : field(m.result, 'outcome')] : []));
const pendingRequests = (input: unknown): unknown[] => {
  const pending = field(input, 'pendingRequests');
  return Array.isArray(pending) ? pending : [];
};
const tickOf = (view: HistoryView): number => Number(field(view.input, 'tickMs') ?? DEFAULT_TICK_MS);
const requestChecks = (view: HistoryView): ScheduledActivity[] => view.scheduledActivities().filter((a) => a.activityType === 'requestCheck');
const successfulClaims = (view: HistoryView): LocalActivityMarker[] => view.localActivities().filter((m) => m.activityType === 'claimRound' && !m.failed);

/** Whether the run took the finish's lasting retry: the patch marker present exactly then. */
function finishLastingMarker(view: HistoryView, problems: string[], lasting: boolean): void {
  need(
    problems,
    view.patches().includes(FINISH_LASTING) === lasting,
    lasting ? `the ${FINISH_LASTING} patch marker` : `no ${FINISH_LASTING} marker (no finish failed its short policy)`,
  );
}

/**
 * A finish that failed its short policy and was tried again under the lasting one: the first
 * marker failed after 20 attempts (more than 20 failures in all), then one workflow timer before
 * each further attempt, each wait no shorter than the last and at most double it.
 */
function lastingFinishes(view: HistoryView, problems: string[], activityType: string): LocalActivityMarker[] {
  const finishes = view.localActivities().filter((m) => m.activityType === activityType);
  const first = finishes[0];
  need(
    problems,
    first !== undefined && first.failed && first.attempt >= 20,
    `a first ${activityType} failing its 20 quick attempts (attempt ${String(first?.attempt)})`,
  );
  need(problems, finishes.length >= 3, `two lasting attempts or more (${finishes.length - 1})`);
  const timers = view.timers();
  const waits = finishes.slice(1).map((m, i) => timers.filter((t) => t.eventIndex > (finishes[i]?.eventIndex ?? 0) && t.eventIndex < m.eventIndex));
  need(
    problems,
    waits.every((between) => between.length === 1),
    `one timer before each lasting attempt (${waits.map((between) => between.length).join(', ')})`,
  );
  const ms = waits.map((between) => between[0]?.ms ?? 0);
  need(
    problems,
    ms.every((wait, i) => wait > 0 && (i === 0 || (wait >= (ms[i - 1] ?? 0) && wait <= 2 * (ms[i - 1] ?? 0)))),
    `waits growing by doubling (${ms.join(', ')} ms)`,
  );
  return finishes;
}

/** A completed cardCheck: the card's bookkeeping, its gateway steps and its record, in one run. */
function cardCheckPath(
  description: string,
  fromPriority: boolean,
  outcome: string,
  extra: (view: HistoryView, problems: string[]) => void = () => undefined,
  finishLasting = false,
): ReplayPath {
  return {
    workflowType: 'cardCheck',
    description,
    check(view) {
      const problems: string[] = [];
      const local = view.localActivities().map((m) => m.activityType);
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_COMPLETED', 'the run completed');
      need(problems, field(view.input, 'fromPriority') === fromPriority, `a card claimed from the ${fromPriority ? 'priority' : 'normal'} lane`);
      need(problems, local[0] === 'prepareExecution', 'prepareExecution first');
      need(problems, local.includes('checkGateway'), 'a gateway step');
      need(problems, outcomeOf(view) === outcome, `outcome ${outcome} (got ${String(outcomeOf(view))})`);
      need(
        problems,
        view.upserts().filter((names) => names.some((name) => name !== CHANGE_VERSION_ATTRIBUTE)).length === 1,
        'the CheckTypes/Outcome search attributes',
      );
      finishLastingMarker(view, problems, finishLasting);
      extra(view, problems);
      return problems;
    },
  };
}

/** The run's records written after its finish (sync: recordExecution; async: enqueueRecord). */
function recordAfterLastFinish(view: HistoryView, problems: string[], finishes: readonly LocalActivityMarker[]): void {
  const last = finishes.at(-1);
  need(
    problems,
    last !== undefined &&
      view
        .localActivities()
        .some((m) => (m.activityType === 'recordExecution' || m.activityType === 'enqueueRecord') && !m.failed && m.eventIndex > last.eventIndex),
    'the record written after the last finish',
  );
}

/** The claim round's answer when the deployment claims in loop activities (SCHEDULER_LOOP=activity). */
const handedOver = (m: LocalActivityMarker): boolean => field(m.result, 'kind') === 'handOver';

/** The scheduler's claim rounds, claimed in the workflow (SCHEDULER_LOOP=workflow): no round handed its claiming over. */
function schedulerBasics(view: HistoryView, problems: string[]): void {
  need(problems, successfulClaims(view).length > 0, 'a successful claimRound');
  need(problems, !successfulClaims(view).some(handedOver), 'the workflow loop: no claimRound handed over to a claim loop activity');
}

const claimLoopLaps = (view: HistoryView): ScheduledActivity[] => view.scheduledActivities().filter((a) => a.activityType === 'runClaimLoop');
const lapEnded = (lap: ScheduledActivity): unknown => field(lap.closed?.result, 'ended');

/**
 * A scheduler run of the activity loop (SCHEDULER_LOOP=activity, docs/design.md 'The claim loop as
 * an activity'): every claim round hands over, the run claims through runClaimLoop laps, each of a
 * generation `<run id>~<lap>` of its own, counting on across hand-overs; no child is started.
 */
function claimLoopBasics(view: HistoryView, problems: string[], minLaps: number): ScheduledActivity[] {
  schedulerRelease(view, problems, 'wake-on-any-task');
  const claims = view.localActivities().filter((m) => m.activityType === 'claimRound');
  need(problems, claims.length > 0 && claims.every((m) => !m.failed && handedOver(m)), 'every claimRound handed over to a claim loop activity');
  const laps = claimLoopLaps(view);
  need(problems, laps.length >= minLaps, `${minLaps} claim loop laps or more (${laps.length})`);
  need(problems, (claims[0]?.eventIndex ?? Number.POSITIVE_INFINITY) < (laps[0]?.eventIndex ?? 0), 'the hand-over before the first lap');
  const generations = laps.map((lap) => field(lap.input, 'generation'));
  need(
    problems,
    generations.every((generation, i) => generation === `${view.runId}~${i + 1}`),
    `laps of generations <run id>~1, ~2, … (${generations.join(', ')})`,
  );
  need(
    problems,
    laps.every((lap) => lap.heartbeatTimeoutMs > 0),
    'laps with a heartbeat timeout',
  );
  need(problems, view.childStarts().length === 0, 'no child started by the run');
  need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
  const rounds = (input: unknown): number => Number(field(input, 'rounds') ?? 0);
  need(problems, rounds(view.continuedInput) > rounds(view.input), "the laps' claim rounds carried to the next run");
  return laps;
}

/**
 * Which release of the scheduler the run is: `wake-on-any-task` (scheduler-wake-on-any-task: the
 * wait between ticks also ends at the first workflow task past the tick), `claim-first`
 * (scheduler-claim-before-signals: the claim runs first, request-check signals are handled beside
 * the loop in bounded batches; the wait ends only at its timer) or `signals-first` (the release
 * before: a tick's signals were handled, awaited, before its claim).
 */
type SchedulerRelease = 'wake-on-any-task' | 'claim-first' | 'signals-first';

/** The claim comes before a tick's signals (every release since signals-first). */
const claimsFirst = (release: SchedulerRelease): boolean => release !== 'signals-first';

function schedulerRelease(view: HistoryView, problems: string[], release: SchedulerRelease): void {
  const marked = view.patches().includes(CLAIM_BEFORE_SIGNALS);
  need(
    problems,
    marked === claimsFirst(release),
    claimsFirst(release) ? `the ${CLAIM_BEFORE_SIGNALS} patch marker` : `no ${CLAIM_BEFORE_SIGNALS} marker (signals handled before the claim)`,
  );
  const wakes = view.patches().includes(WAKE_ON_ANY_TASK);
  need(
    problems,
    wakes === (release === 'wake-on-any-task'),
    release === 'wake-on-any-task' ? `the ${WAKE_ON_ANY_TASK} patch marker` : `no ${WAKE_ON_ANY_TASK} marker (the wait ends at its timer)`,
  );
}

function schedulerDrain(release: SchedulerRelease, description: string): ReplayPath {
  return {
    workflowType: 'carrierScheduler',
    description,
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      schedulerRelease(view, problems, release);
      need(problems, view.patches().includes(DRAIN_CHILDREN), `the ${DRAIN_CHILDREN} patch marker`);
      const starts = view.childStarts();
      need(problems, starts.length > 0, 'cardCheck children started by the run');
      const claims = successfulClaims(view);
      const firstDrained = claims.find((m) => field(m.result, 'startedByClaim') === true && field(m.result, 'kind') === 'claimed');
      need(problems, firstDrained !== undefined, 'a draining round whose runs the claim activity started');
      need(problems, firstDrained === undefined || starts.every((s) => s.eventIndex < firstDrained.eventIndex), 'no child started once draining');
      need(problems, view.count('CHILD_WORKFLOW_EXECUTION_COMPLETED') === starts.length, 'every child reported its completion before the continue-as-new');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      return problems;
    },
  };
}

function schedulerRequestCheck(release: SchedulerRelease, description: string): ReplayPath {
  return {
    workflowType: 'carrierScheduler',
    description,
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      schedulerRelease(view, problems, release);
      need(problems, view.updatesAccepted().includes('requestCheck'), 'an accepted requestCheck update');
      need(problems, view.count('WORKFLOW_EXECUTION_UPDATE_COMPLETED') >= 1, 'the update completed');
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      need(problems, requestChecks(view).length >= 2, 'a requestCheck activity for each');
      const priorityQueue = String(field(field(view.input, 'taskQueues'), 'cardPriority'));
      // Child start mode starts the priority lane's runs from the claim activity (card shape); a
      // run recorded before that started them as children on the priority queue.
      need(
        problems,
        view.childStarts().some((c) => c.taskQueue === priorityQueue) || successfulClaims(view).some((m) => field(m.result, 'priorityStartedByClaim') === true),
        'a cardCheck started on the priority queue (a child there, or by the claim activity)',
      );
      return problems;
    },
  };
}

function schedulerFailureStreak(release: SchedulerRelease, description: string): ReplayPath {
  return {
    workflowType: 'carrierScheduler',
    description,
    check(view) {
      const problems: string[] = [];
      schedulerRelease(view, problems, release);
      const claims = view.localActivities().filter((m) => m.activityType === 'claimRound');
      const timers = view.timers();
      // The backoff after each failed claim: the next timer after its marker.
      const backoffs = claims.filter((m) => m.failed).map((m) => timers.find((t) => t.eventIndex > m.eventIndex)?.ms ?? 0);
      need(problems, backoffs.length >= 2, `two failed claim rounds or more (got ${backoffs.length})`);
      need(
        problems,
        backoffs.every((ms, i) => i === 0 || ms > (backoffs[i - 1] ?? 0)),
        `each backoff longer than the last (${backoffs.join(', ')} ms)`,
      );
      // The loop's backoff counts its own step's failures only: the streak's first wait is two ticks.
      if (claimsFirst(release)) need(problems, backoffs[0] === 2 * tickOf(view), `the first backoff two ticks (${String(backoffs[0])} ms)`);
      const lastFailure = claims.filter((m) => m.failed).at(-1);
      need(
        problems,
        lastFailure !== undefined && claims.some((m) => !m.failed && m.eventIndex > lastFailure.eventIndex),
        'a successful claim after the streak',
      );
      return problems;
    },
  };
}

function schedulerContinueWithPending(release: SchedulerRelease, description: string): ReplayPath {
  return {
    workflowType: 'carrierScheduler',
    description,
    check(view) {
      const problems: string[] = [];
      schedulerRelease(view, problems, release);
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      const failed = requestChecks(view).filter((a) => a.closed?.type === 'ACTIVITY_TASK_FAILED');
      need(problems, failed.length >= 1, 'a failed requestCheck activity');
      if (claimsFirst(release)) {
        // Beside the loop: claim rounds go on while the request-check is under way.
        const claims = successfulClaims(view);
        need(
          problems,
          failed.some((a) => claims.some((m) => m.eventIndex > a.eventIndex && m.eventIndex < (a.closed?.eventIndex ?? 0))),
          'a claim round while a failing request-check was under way',
        );
      }
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      need(problems, pendingRequests(view.continuedInput).length >= 1, 'the next run gets the pending request');
      return problems;
    },
  };
}

function schedulerStartWithPending(release: SchedulerRelease, description: string): ReplayPath {
  return {
    workflowType: 'carrierScheduler',
    description,
    check(view) {
      const problems: string[] = [];
      schedulerRelease(view, problems, release);
      need(problems, pendingRequests(view.input).length >= 1, 'started with a pending request');
      const firstRequest = requestChecks(view)[0];
      const firstClaim = successfulClaims(view)[0];
      if (claimsFirst(release))
        need(
          problems,
          firstRequest !== undefined && firstClaim !== undefined && firstClaim.eventIndex < firstRequest.eventIndex,
          'the first claim before the pending request',
        );
      else need(problems, view.activities()[0] === 'requestCheck', 'the pending request applied first');
      need(problems, firstRequest?.closed?.type === 'ACTIVITY_TASK_COMPLETED', 'its activity completed');
      schedulerBasics(view, problems);
      return problems;
    },
  };
}

/**
 * How pollingControl's reconcile starts the schedulers: `by-client` (control-start-schedulers-by-client:
 * the startMissingSchedulers activity) or `child-starts` (the releases before both start patches: a
 * carrierScheduler child start per enabled account, listEnabledCarriers).
 */
type ControlRelease = 'by-client' | 'child-starts';
const START_BY_CLIENT = 'control-start-schedulers-by-client';
const START_MISSING = 'control-start-missing-schedulers';
const reconcileActivity = (release: ControlRelease): string => (release === 'by-client' ? 'startMissingSchedulers' : 'listEnabledCarriers');

function controlRelease(view: HistoryView, problems: string[], release: ControlRelease): void {
  const patches = view.patches();
  if (release === 'by-client') {
    need(problems, patches.includes(START_BY_CLIENT) && patches.includes(START_MISSING), `the ${START_MISSING} and ${START_BY_CLIENT} patch markers`);
    need(problems, view.childStarts().length === 0, 'no child start (schedulers started by the activity)');
    need(
      problems,
      !view.activities().some((a) => a === 'listEnabledCarriers' || a === 'listSchedulersToStart'),
      'no listEnabledCarriers nor listSchedulersToStart (the releases before)',
    );
  } else need(problems, !patches.includes(START_BY_CLIENT) && !patches.includes(START_MISSING), 'no start patch marker (child starts per enabled account)');
}

function pollingControlReconcile(release: ControlRelease, description: string): ReplayPath {
  return {
    workflowType: 'pollingControl',
    description,
    check(view) {
      const problems: string[] = [];
      controlRelease(view, problems, release);
      const activities = view.activities();
      need(problems, activities[0] === 'readMode', 'readMode first');
      need(problems, activities.filter((a) => a === reconcileActivity(release)).length >= 2, 'two reconcile rounds or more');
      need(problems, activities.includes('ensureRedisIntact'), 'the Redis guard of reconcile');
      if (release === 'by-client') {
        const starts = view.scheduledActivities().filter((a) => a.activityType === 'startMissingSchedulers');
        const started = starts.findIndex((a) => Number(field(a.closed?.result, 'started') ?? 0) >= 1);
        need(problems, started >= 0, 'a reconcile that started the scheduler');
        need(
          problems,
          starts.slice(started + 1).some((a) => {
            const enabled = field(a.closed?.result, 'enabled');
            return Array.isArray(enabled) && enabled.length >= 1 && field(a.closed?.result, 'started') === 0;
          }),
          'a later reconcile that found it running (started none)',
        );
      } else {
        need(
          problems,
          view.childStarts().some((c) => c.workflowType === 'carrierScheduler'),
          'a carrierScheduler child start',
        );
        need(problems, view.count('START_CHILD_WORKFLOW_EXECUTION_FAILED') >= 1, 'a start that found the scheduler running');
      }
      need(problems, !activities.includes('switchMode'), 'no mode switch');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      return problems;
    },
  };
}

function pollingControlModeSwitch(heartbeat: boolean, release: ControlRelease, description: string): ReplayPath {
  return {
    workflowType: 'pollingControl',
    description,
    check(view) {
      const problems: string[] = [];
      const activities = view.activities();
      need(problems, activities.filter((a) => a === 'switchMode').length >= 2, 'two switchMode activities');
      need(problems, view.updatesAccepted().includes('setMode'), 'a setMode update');
      need(problems, view.signals().includes('setMode'), 'a setMode signal');
      const lastSwitch = activities.lastIndexOf('switchMode');
      controlRelease(view, problems, release);
      need(problems, lastSwitch >= 0 && activities.slice(lastSwitch).includes(reconcileActivity(release)), 'a reconcile after the switch');
      const switches = view.scheduledActivities().filter((a) => a.activityType === 'switchMode');
      need(
        problems,
        switches.every((a) => a.heartbeatTimeoutMs > 0 === heartbeat),
        heartbeat ? 'switchMode with a heartbeat timeout' : 'switchMode without a heartbeat timeout (the release before)',
      );
      return problems;
    },
  };
}

export const REPLAY_PATHS: Readonly<Record<string, ReplayPath>> = {
  'pollingControl-reconcile': pollingControlReconcile(
    'by-client',
    'pollingControl from its start to its continue-as-new (control-start-schedulers-by-client): reconcile rounds whose startMissingSchedulers activity starts the scheduler with the client, then finds it running.',
  ),
  'pollingControl-mode-switch': pollingControlModeSwitch(
    true,
    'by-client',
    'pollingControl switching to legacy and back to carrier (setMode update and signal), each switch (heartbeating, its own heartbeat timeout) followed by a reconcile.',
  ),
  'carrierScheduler-drain': schedulerDrain(
    'wake-on-any-task',
    'A scheduler run from its start to its continue-as-new (scheduler-drain-children): claim rounds starting cardCheck children, then the drain, whose rounds are started by the claim activity, until the children completed.',
  ),
  'carrierScheduler-request-check': schedulerRequestCheck(
    'wake-on-any-task',
    'A scheduler run serving request-checks: one as an update, one as a signal handled beside the loop after the claim; the card is claimed from the priority lane and run on the priority queue.',
  ),
  'carrierScheduler-request-check-rejected': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run whose request-check signal the activity rejects for good (request_check_rejected, non-retryable, audited on its card): tried once, dropped, no failure of the loop (no backoff), not carried over.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      schedulerRelease(view, problems, 'wake-on-any-task');
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      const all = requestChecks(view);
      const rejected = all.find((a) => a.closed?.failureType === 'request_check_rejected');
      need(problems, rejected !== undefined, 'a requestCheck activity failed as request_check_rejected');
      if (rejected === undefined) return problems;
      const cardId = field(field(rejected.input, 'request'), 'cardId');
      need(problems, field(rejected.input, 'fromSignal') === true, "a signal's request (audited by the activity)");
      need(problems, rejected.closed?.nonRetryable === true, 'non-retryable');
      need(problems, rejected.attempt === 1, `tried once (attempt ${String(rejected.attempt)})`);
      need(
        problems,
        all.every((a) => a === rejected || field(field(a.input, 'request'), 'cardId') !== cardId),
        'not tried again (dropped)',
      );
      need(
        problems,
        pendingRequests(view.continuedInput).every((r) => field(r, 'cardId') !== cardId),
        'not carried over continue-as-new',
      );
      const closedAt = rejected.closed?.eventIndex ?? 0;
      const nextWait = view.timers().find((t) => t.eventIndex > closedAt);
      need(problems, nextWait !== undefined && nextWait.ms <= tickOf(view), `no backoff after it (next wait ${String(nextWait?.ms)} ms)`);
      need(
        problems,
        successfulClaims(view).some((m) => m.eventIndex > closedAt),
        'claim rounds after it',
      );
      return problems;
    },
  },
  'carrierScheduler-signal-batches': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run handling request-check signals beside the loop, at most maxSignalsPerTick at a time: signals sent together wait, pending, for the batch under way while claim rounds go on.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      schedulerRelease(view, problems, 'wake-on-any-task');
      const bound = Number(field(view.input, 'maxSignalsPerTick') ?? 0);
      need(problems, bound >= 1, 'a batch bound in the input');
      const fromSignals = requestChecks(view).filter((a) => field(a.input, 'fromSignal') === true);
      need(problems, fromSignals.length > bound, `more signals than one batch takes (${fromSignals.length} for a bound of ${bound})`);
      need(
        problems,
        fromSignals.every((a) => a.closed?.type === 'ACTIVITY_TASK_COMPLETED'),
        'every request applied',
      );
      // At no point more of them under way than the bound.
      const underWay = (eventIndex: number): number =>
        fromSignals.filter((a) => a.eventIndex <= eventIndex && (a.closed?.eventIndex ?? Number.POSITIVE_INFINITY) > eventIndex).length;
      need(
        problems,
        fromSignals.every((a) => underWay(a.eventIndex) <= bound),
        `at most ${bound} under way at once`,
      );
      const signalled = view.events.flatMap((e, eventIndex) => (e.workflowExecutionSignaledEventAttributes?.signalName === 'requestCheck' ? [eventIndex] : []));
      const firstClosed = fromSignals[0]?.closed?.eventIndex ?? 0;
      need(problems, signalled.filter((i) => i < firstClosed).length > bound, 'signals pending while the first batch was under way');
      const claims = successfulClaims(view);
      need(
        problems,
        fromSignals.slice(1).every((a, i) => claims.some((m) => m.eventIndex > (fromSignals[i]?.eventIndex ?? 0) && m.eventIndex < a.eventIndex)),
        'a claim round between one batch and the next',
      );
      return problems;
    },
  },
  'carrierScheduler-failure-streak': schedulerFailureStreak(
    'wake-on-any-task',
    'A scheduler run whose claim fails round after round (Redis unavailable): each failure backs the loop off longer (from two ticks: only its own step counts), until a claim succeeds again.',
  ),
  'carrierScheduler-continue-with-pending-requests': schedulerContinueWithPending(
    'wake-on-any-task',
    'A scheduler run whose request-check signal keeps failing (PostgreSQL unavailable), handled beside the loop while claim rounds go on: it is retried and travels to the next run at continue-as-new.',
  ),
  'carrierScheduler-start-with-pending-requests': schedulerStartWithPending(
    'wake-on-any-task',
    'The run after it: started with the pending request, which it applies after its first claim.',
  ),
  // SCHEDULER_LOOP=activity (the default): the run claims through laps of the runClaimLoop activity.
  'carrierScheduler-claim-loop': {
    workflowType: 'carrierScheduler',
    description:
      "A scheduler run of the activity loop (SCHEDULER_LOOP=activity): its claim round hands over, then runClaimLoop laps, each ended by a newer owner of the account (superseded) and followed at once by the next, without a round, timer or stop between, until the run continues as new with the laps' rounds.",
    check(view) {
      const problems: string[] = [];
      const laps = claimLoopBasics(view, problems, 3);
      need(
        problems,
        laps.every((lap) => lap.closed?.type === 'ACTIVITY_TASK_COMPLETED' && field(lap.closed.result, 'kind') === 'lap' && lapEnded(lap) === 'superseded'),
        `every lap completed, superseded (${laps.map((lap) => `${String(lap.closed?.type)}/${String(lapEnded(lap))}`).join(', ')})`,
      );
      need(
        problems,
        view.localActivities().filter((m) => m.activityType === 'claimRound').length === 1,
        'one claimRound: the hand-over, no round loop between laps',
      );
      need(problems, view.timers().length === 0, 'no timer');
      need(
        problems,
        view.activities().every((a) => a === 'runClaimLoop'),
        `no activity but the laps (${[...new Set(view.activities())].join(', ')})`,
      );
      return problems;
    },
  },
  'carrierScheduler-claim-loop-failed-lap': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run of the activity loop whose lap fails (Redis away as it takes the account): the run records the failure, returns to its round loop, backs off, and its next claim round hands over again to a lap of the next generation.',
    check(view) {
      const problems: string[] = [];
      const laps = claimLoopBasics(view, problems, 2);
      const failedAt = laps.findIndex((lap) => lap.closed?.type === 'ACTIVITY_TASK_FAILED' || lap.closed?.type === 'ACTIVITY_TASK_TIMED_OUT');
      const failed = laps[failedAt];
      need(problems, failed !== undefined, 'a lap that failed (or timed out)');
      if (failed === undefined) return problems;
      const next = laps[failedAt + 1];
      const between = (eventIndex: number): boolean => eventIndex > (failed.closed?.eventIndex ?? 0) && eventIndex < (next?.eventIndex ?? 0);
      need(problems, next !== undefined, 'a lap after it');
      need(
        problems,
        view.timers().some((t) => between(t.eventIndex) && t.ms >= 2 * tickOf(view)),
        'the round loop backing off after it (a timer of two ticks or more)',
      );
      need(
        problems,
        view.localActivities().some((m) => m.activityType === 'claimRound' && handedOver(m) && between(m.eventIndex)),
        'a claim round handing over again before the next lap',
      );
      need(
        problems,
        laps.slice(failedAt + 1).some((lap) => lap.closed?.type === 'ACTIVITY_TASK_COMPLETED'),
        'a later lap that completed',
      );
      return problems;
    },
  },
  'carrierScheduler-claim-loop-request-check': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run of the activity loop reached by request-checks while a lap runs: a requestCheck update and a signal, each served by its activity beside the lap, and a priorityRequested update; the lap goes on (the loop claims the card from the priority lane) and is not stopped.',
    check(view) {
      const problems: string[] = [];
      const laps = claimLoopBasics(view, problems, 1);
      need(problems, view.updatesAccepted().includes('requestCheck'), 'an accepted requestCheck update');
      need(problems, view.updatesAccepted().includes('priorityRequested'), 'an accepted priorityRequested update');
      need(problems, view.count('WORKFLOW_EXECUTION_UPDATE_COMPLETED') >= 2, 'the updates completed');
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      const requests = requestChecks(view);
      need(
        problems,
        requests.some((a) => field(a.input, 'fromSignal') === true) && requests.some((a) => field(a.input, 'fromSignal') !== true),
        'a requestCheck activity for the update and for the signal',
      );
      const lapAround = (a: ScheduledActivity): boolean =>
        laps.some(
          (lap) => lap.eventIndex < a.eventIndex && (lap.closed?.eventIndex ?? Number.POSITIVE_INFINITY) > (a.closed?.eventIndex ?? Number.POSITIVE_INFINITY),
        );
      need(
        problems,
        requests.length > 0 && requests.every((a) => a.closed?.type === 'ACTIVITY_TASK_COMPLETED' && lapAround(a)),
        'each served, completed, while one lap ran on',
      );
      need(problems, !view.activities().includes('stopClaimLoop'), 'no lap stopped for them');
      return problems;
    },
  },
  cardCheck: cardCheckPath('A cardCheck of the normal lane: prepare, its due gateway steps, finish, record.', false, 'success'),
  'cardCheck-priority': cardCheckPath('A cardCheck of a request-check, claimed from the priority lane.', true, 'success'),
  'cardCheck-deferral': cardCheckPath(
    'A cardCheck whose step the carrier rate-limited: every step deferred, the card due again.',
    false,
    'deferred',
    (view, problems) =>
      need(
        problems,
        stepOutcomes(view).every((o) => o === 'deferred'),
        `every step deferred (${stepOutcomes(view).join(', ')})`,
      ),
  ),
  'cardCheck-lease-lost': cardCheckPath(
    'A cardCheck whose lease another claim took during its first step: the second step is not called, finish takes the stale path.',
    false,
    'lease_lost',
    (view, problems) => {
      need(problems, stepOutcomes(view).includes('lease_lost'), 'a step that found the lease lost');
      need(
        problems,
        view.localActivities().some((m) => m.activityType === 'finishExecution'),
        "finish of the first step's result",
      );
    },
  ),
  'cardCheck-finish-lasting': cardCheckPath(
    'A cardCheck whose finish fails more than 20 times (Redis away): after its 20 quick attempts it is tried again after doubling workflow timers (card-finish-retry-lasting) until it lands; the record follows.',
    false,
    'success',
    (view, problems) => {
      const finishes = lastingFinishes(view, problems, 'finishExecution');
      need(problems, finishes.at(-1)?.failed === false, 'the last finish landed');
      need(
        problems,
        stepOutcomes(view).every((o) => o === 'success'),
        `its steps succeeded (${stepOutcomes(view).join(', ')})`,
      );
      recordAfterLastFinish(view, problems, finishes);
    },
    true,
  ),
  'cardCheck-finish-lease-lost': cardCheckPath(
    'A cardCheck whose finish never lands (Redis away past the lasting bound): timers until the bound, then the record written without it (outcome lease_lost).',
    false,
    'lease_lost',
    (view, problems) => {
      const finishes = lastingFinishes(view, problems, 'finishExecution');
      need(
        problems,
        finishes.every((m) => m.failed),
        'every finish failed',
      );
      need(
        problems,
        stepOutcomes(view).every((o) => o === 'success'),
        `its steps succeeded, the lease was not lost at the carrier (${stepOutcomes(view).join(', ')})`,
      );
      recordAfterLastFinish(view, problems, finishes);
    },
    true,
  ),
  cardBatch: {
    workflowType: 'cardBatch',
    description: 'A cardBatch of several cards, one of which the carrier refuses: batched bookkeeping, the refused card failing alone.',
    check(view) {
      const problems: string[] = [];
      const cards = field(view.input, 'cards');
      need(problems, Array.isArray(cards) && cards.length >= 2, 'two cards or more');
      const outcomes = field(view.result, 'outcomes');
      need(
        problems,
        Number(field(outcomes, 'success') ?? 0) >= 1 && Number(field(outcomes, 'failure') ?? 0) >= 1,
        `successes and a failure (${JSON.stringify(outcomes)})`,
      );
      need(
        problems,
        view.localActivities().some((m) => m.activityType === 'cardBookkeepingBatch'),
        'batched bookkeeping',
      );
      finishLastingMarker(view, problems, false);
      return problems;
    },
  },
  'cardBatch-finish-lasting': {
    workflowType: 'cardBatch',
    description:
      "A cardBatch whose finish flush fails more than 20 times (Redis away): the batch's gate tries it again after doubling workflow timers (card-finish-retry-lasting) until it lands; every card's record follows.",
    check(view) {
      const problems: string[] = [];
      const cards = field(view.input, 'cards');
      need(problems, Array.isArray(cards) && cards.length >= 2, 'two cards or more');
      finishLastingMarker(view, problems, true);
      const outcomes = field(view.result, 'outcomes');
      need(problems, Array.isArray(cards) && Number(field(outcomes, 'success') ?? 0) === cards.length, `every card succeeded (${JSON.stringify(outcomes)})`);
      const flushes = view.localActivities().filter((m) => m.activityType === 'cardBookkeepingBatch');
      const firstFailed = flushes.findIndex((m) => m.failed);
      const lasting = firstFailed < 0 ? [] : flushes.slice(firstFailed);
      need(problems, lasting[0] !== undefined && lasting[0].attempt >= 20, `a flush failing its 20 quick attempts (attempt ${String(lasting[0]?.attempt)})`);
      const landed = lasting.findIndex((m) => !m.failed);
      need(problems, landed >= 2, `two lasting attempts or more before it landed (${landed})`);
      const timers = view.timers();
      const waits = lasting
        .slice(1, landed + 1)
        .map((m, i) => timers.filter((t) => t.eventIndex > (lasting[i]?.eventIndex ?? 0) && t.eventIndex < m.eventIndex));
      need(
        problems,
        waits.length > 0 && waits.every((between) => between.length === 1),
        `one timer before each lasting attempt (${waits.map((between) => between.length).join(', ')})`,
      );
      need(
        problems,
        flushes.some((m, i) => i > firstFailed + landed && !m.failed),
        'a flush after the finish landed (the records)',
      );
      return problems;
    },
  },
  // Histories recorded with releases before the current patches: what running runs of those releases hold.
  'earlier-carrierScheduler-unpatched': {
    workflowType: 'carrierScheduler',
    description: 'A scheduler run of the release before scheduler-drain-children, to its continue-as-new.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      need(problems, !view.patches().includes(DRAIN_CHILDREN), 'no drain patch marker (the unpatched branch)');
      need(problems, view.childStarts().length > 0, 'children started');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      return problems;
    },
  },
  'earlier-carrierScheduler-open': {
    workflowType: 'carrierScheduler',
    description: 'The start of a scheduler run of that release, open when recorded.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      need(problems, view.lastType === 'WORKFLOW_TASK_COMPLETED', 'open: ends in a completed workflow task');
      return problems;
    },
  },
  'earlier-pollingControl': {
    workflowType: 'pollingControl',
    description: 'An open pollingControl run of the release before control-smaller-history.',
    check(view) {
      const problems: string[] = [];
      need(problems, !view.patches().includes('control-smaller-history'), 'no control-smaller-history marker (the unpatched branch)');
      need(problems, view.activities().includes('listEnabledCarriers'), 'a reconcile');
      need(
        problems,
        view.childStarts().some((c) => c.workflowType === 'carrierScheduler'),
        'a scheduler start',
      );
      return problems;
    },
  },
  'earlier-cardCheck-priority': cardCheckPath('A cardCheck of that release (priority lane).', true, 'success'),
  'earlier-cardBatch': {
    workflowType: 'cardBatch',
    description: 'A cardBatch of that release, one card refused.',
    check(view) {
      const problems: string[] = [];
      const outcomes = field(view.result, 'outcomes');
      need(problems, Number(field(outcomes, 'failure') ?? 0) >= 1, `a failed card (${JSON.stringify(outcomes)})`);
      return problems;
    },
  },
  // The release before scheduler-wake-on-any-task (the wait between ticks ended only at its timer):
  // the paths it recorded, kept as they were.
  'earlier-carrierScheduler-timer-wait-drain': schedulerDrain(
    'claim-first',
    'A scheduler run of the timer-wait release, from its start to its drained continue-as-new.',
  ),
  'earlier-carrierScheduler-timer-wait-request-check': schedulerRequestCheck(
    'claim-first',
    'A scheduler run of the timer-wait release serving request-checks (update and signal, the signal handled beside the loop).',
  ),
  'earlier-carrierScheduler-timer-wait-failure-streak': schedulerFailureStreak(
    'claim-first',
    'A scheduler run of the timer-wait release through a claim failure streak.',
  ),
  'earlier-carrierScheduler-timer-wait-continue-with-pending-requests': schedulerContinueWithPending(
    'claim-first',
    'A scheduler run of the timer-wait release carrying a failing request-check signal over continue-as-new.',
  ),
  'earlier-carrierScheduler-timer-wait-start-with-pending-requests': schedulerStartWithPending(
    'claim-first',
    'The run after it (timer-wait): the pending request applied before its first claim.',
  ),
  // The release before scheduler-claim-before-signals (a tick's signals handled before its claim)
  // and before switchMode's heartbeat timeout: the paths it recorded, kept as they were.
  'earlier-carrierScheduler-signals-first-drain': schedulerDrain(
    'signals-first',
    'A scheduler run of the signals-first release, from its start to its drained continue-as-new.',
  ),
  'earlier-carrierScheduler-signals-first-request-check': schedulerRequestCheck(
    'signals-first',
    'A scheduler run of the signals-first release serving request-checks (update and signal, the signal handled before the claim).',
  ),
  'earlier-carrierScheduler-signals-first-failure-streak': schedulerFailureStreak(
    'signals-first',
    'A scheduler run of the signals-first release through a claim failure streak.',
  ),
  'earlier-carrierScheduler-signals-first-continue-with-pending-requests': schedulerContinueWithPending(
    'signals-first',
    'A scheduler run of the signals-first release carrying a failing request-check signal over continue-as-new.',
  ),
  'earlier-carrierScheduler-signals-first-start-with-pending-requests': schedulerStartWithPending(
    'signals-first',
    'The run after it (signals-first): the pending request applied before its first claim.',
  ),
  // The release before control-start-missing-schedulers and control-start-schedulers-by-client (a
  // child start per enabled account at every reconcile): the paths it recorded, kept as they were.
  'earlier-pollingControl-child-starts-reconcile': pollingControlReconcile(
    'child-starts',
    'pollingControl of the child-starts release, from its start to its continue-as-new: reconcile rounds that start the scheduler as a child (and find it running).',
  ),
  'earlier-pollingControl-child-starts-mode-switch': pollingControlModeSwitch(
    true,
    'child-starts',
    'pollingControl of the child-starts release switching to legacy and back (update and signal), each switch followed by a reconcile.',
  ),
  'earlier-pollingControl-mode-switch-no-heartbeat': pollingControlModeSwitch(
    false,
    'child-starts',
    'pollingControl switching mode and back, of the release whose switchMode had no heartbeat timeout.',
  ),
};
