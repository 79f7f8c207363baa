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
      return [{ eventIndex, activityType: String(field(data, 'activity_type')), result: decodeFirst(marker.details?.result), failed: Boolean(marker.failure) }];
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

const outcomeOf = (view: HistoryView): unknown => field(view.result, 'outcome');
const stepOutcomes = (view: HistoryView): unknown[] =>
  view.localActivities().flatMap((m) => (m.activityType === 'checkGateway' ? [m.result === 'lease_lost' ? 'lease_lost' : field(m.result, 'outcome')] : []));
const pendingRequests = (input: unknown): unknown[] => {
  const pending = field(input, 'pendingRequests');
  return Array.isArray(pending) ? pending : [];
};

/** A completed cardCheck: the card's bookkeeping, its gateway steps and its record, in one run. */
function cardCheckPath(
  description: string,
  fromPriority: boolean,
  outcome: string,
  extra: (view: HistoryView, problems: string[]) => void = () => undefined,
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
      need(problems, view.count('UPSERT_WORKFLOW_SEARCH_ATTRIBUTES') === 1, 'the CheckTypes/Outcome search attributes');
      extra(view, problems);
      return problems;
    },
  };
}

/** The scheduler's claim rounds, with children started by the run. */
function schedulerBasics(view: HistoryView, problems: string[]): void {
  need(
    problems,
    view.localActivities().some((m) => m.activityType === 'claimRound' && !m.failed),
    'a successful claimRound',
  );
}

export const REPLAY_PATHS: Readonly<Record<string, ReplayPath>> = {
  'pollingControl-reconcile': {
    workflowType: 'pollingControl',
    description: 'pollingControl from its start to its continue-as-new: reconcile rounds that start the scheduler (and find it running).',
    check(view) {
      const problems: string[] = [];
      const activities = view.activities();
      need(problems, activities[0] === 'readMode', 'readMode first');
      need(problems, activities.filter((a) => a === 'listEnabledCarriers').length >= 2, 'two reconcile rounds or more');
      need(problems, activities.includes('ensureRedisIntact'), 'the Redis guard of reconcile');
      need(
        problems,
        view.childStarts().some((c) => c.workflowType === 'carrierScheduler'),
        'a carrierScheduler child start',
      );
      need(problems, view.count('START_CHILD_WORKFLOW_EXECUTION_FAILED') >= 1, 'a start that found the scheduler running');
      need(problems, !activities.includes('switchMode'), 'no mode switch');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      return problems;
    },
  },
  'pollingControl-mode-switch': {
    workflowType: 'pollingControl',
    description: 'pollingControl switching to legacy and back to carrier (setMode update and signal), each switch followed by a reconcile.',
    check(view) {
      const problems: string[] = [];
      const activities = view.activities();
      need(problems, activities.filter((a) => a === 'switchMode').length >= 2, 'two switchMode activities');
      need(problems, view.updatesAccepted().includes('setMode'), 'a setMode update');
      need(problems, view.signals().includes('setMode'), 'a setMode signal');
      const lastSwitch = activities.lastIndexOf('switchMode');
      need(problems, lastSwitch >= 0 && activities.slice(lastSwitch).includes('listEnabledCarriers'), 'a reconcile after the switch');
      return problems;
    },
  },
  'carrierScheduler-drain': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run from its start to its continue-as-new (scheduler-drain-children): claim rounds starting cardCheck children, then the drain, whose rounds are started by the claim activity, until the children completed.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      need(problems, view.patches().includes('scheduler-drain-children'), 'the scheduler-drain-children patch marker');
      const starts = view.childStarts();
      need(problems, starts.length > 0, 'cardCheck children started by the run');
      const claims = view.localActivities().filter((m) => m.activityType === 'claimRound' && !m.failed);
      const firstDrained = claims.find((m) => field(m.result, 'startedByClaim') === true && field(m.result, 'kind') === 'claimed');
      need(problems, firstDrained !== undefined, 'a draining round whose runs the claim activity started');
      need(problems, firstDrained === undefined || starts.every((s) => s.eventIndex < firstDrained.eventIndex), 'no child started once draining');
      need(problems, view.count('CHILD_WORKFLOW_EXECUTION_COMPLETED') === starts.length, 'every child reported its completion before the continue-as-new');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      return problems;
    },
  },
  'carrierScheduler-request-check': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run serving request-checks: one as an update, one as a signal; the card is claimed from the priority lane and run on the priority queue.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      need(problems, view.updatesAccepted().includes('requestCheck'), 'an accepted requestCheck update');
      need(problems, view.count('WORKFLOW_EXECUTION_UPDATE_COMPLETED') >= 1, 'the update completed');
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      need(problems, view.activities().filter((a) => a === 'requestCheck').length >= 2, 'a requestCheck activity for each');
      const priorityQueue = String(field(field(view.input, 'taskQueues'), 'cardPriority'));
      need(
        problems,
        view.childStarts().some((c) => c.taskQueue === priorityQueue),
        'a cardCheck started on the priority queue',
      );
      return problems;
    },
  },
  'carrierScheduler-failure-streak': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run whose claim fails round after round (Redis unavailable): each failure backs the loop off longer, until a claim succeeds again.',
    check(view) {
      const problems: string[] = [];
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
      const lastFailure = claims.filter((m) => m.failed).at(-1);
      need(
        problems,
        lastFailure !== undefined && claims.some((m) => !m.failed && m.eventIndex > lastFailure.eventIndex),
        'a successful claim after the streak',
      );
      return problems;
    },
  },
  'carrierScheduler-continue-with-pending-requests': {
    workflowType: 'carrierScheduler',
    description:
      'A scheduler run whose request-check signal keeps failing (PostgreSQL unavailable): it is retried each tick and travels to the next run at continue-as-new.',
    check(view) {
      const problems: string[] = [];
      need(problems, view.signals().includes('requestCheck'), 'a requestCheck signal');
      need(problems, view.failedActivities() >= 1, 'a failed requestCheck activity');
      need(problems, view.lastType === 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 'ends in continue-as-new');
      need(problems, pendingRequests(view.continuedInput).length >= 1, 'the next run gets the pending request');
      return problems;
    },
  },
  'carrierScheduler-start-with-pending-requests': {
    workflowType: 'carrierScheduler',
    description: 'The run after it: started with the pending request, which it applies in its first tick.',
    check(view) {
      const problems: string[] = [];
      need(problems, pendingRequests(view.input).length >= 1, 'started with a pending request');
      need(problems, view.activities()[0] === 'requestCheck', 'the pending request applied first');
      need(problems, view.count('ACTIVITY_TASK_COMPLETED') >= 1, 'its activity completed');
      schedulerBasics(view, problems);
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
      return problems;
    },
  },
  // Histories recorded with the release before the current patches: what running runs of that release hold.
  'earlier-carrierScheduler-unpatched': {
    workflowType: 'carrierScheduler',
    description: 'A scheduler run of the release before scheduler-drain-children, to its continue-as-new.',
    check(view) {
      const problems: string[] = [];
      schedulerBasics(view, problems);
      need(problems, !view.patches().includes('scheduler-drain-children'), 'no drain patch marker (the unpatched branch)');
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
};
