/**
 * When a carrierScheduler claimed, read from its history: every run of it (continue-as-new
 * included), each claim round being the `claimRound` local activity's marker, timed by the
 * completion time the SDK records in it. The longest gap between two rounds is how long the
 * account's cards waited for no reason but the scheduler (a failed or timed-out workflow task, a
 * slow replay, a continue-as-new) — the stall the `overload` scenario looks for.
 */
import type { Client } from '@temporalio/client';
import { countEvents, emptyCounts, eventMs, runChain, type EventCounts, type HistoryEvent } from './actions.js';
import { round } from './stats.js';

/** The scheduler's claim activity (src/activities/control.ts). */
const CLAIM_ACTIVITY = 'claimRound';

export interface SchedulerRounds {
  readonly workflowId: string;
  /** Claim rounds recorded in the window. */
  readonly rounds: number;
  /** Runs that started in the window (continue-as-new). */
  readonly continuedAsNew: number;
  readonly longestGapMs: number;
  /** When the longest gap began (ISO). */
  readonly longestGapFrom: string | null;
  readonly gapsOverMs: Readonly<Record<string, number>>;
  /** The scheduler's events in the window: workflow task failures and timeouts among them. */
  readonly counts: EventCounts;
  /** Every claim of a card from the priority lane in its recorded runs, with the claim's instant (ms). */
  readonly priorityClaims: readonly PriorityClaim[];
}

export interface PriorityClaim {
  readonly cardId: string;
  readonly claimedAt: number;
}

interface MarkerData {
  readonly activity_type?: string;
  readonly complete_time?: { readonly seconds?: number | string; readonly nanos?: number };
}

/** The local activity a marker records and when it completed (the event's time when the marker does not say). */
function localActivity(event: HistoryEvent): { type: string; at: number } | undefined {
  const marker = event.markerRecordedEventAttributes;
  if (!marker) return undefined;
  const payload = marker.details?.data?.payloads?.[0]?.data;
  if (!payload) return undefined;
  try {
    const data = JSON.parse(Buffer.from(payload).toString('utf8')) as MarkerData;
    const done = data.complete_time;
    const at = done ? Number(done.seconds ?? 0) * 1000 + Math.floor((done.nanos ?? 0) / 1e6) : eventMs(event);
    return { type: data.activity_type ?? '', at };
  } catch {
    return undefined;
  }
}

/**
 * The priority-lane claims a claim round's marker records: its result names each claimed card with
 * its token, `<prefix>@<claim instant ms>:<cardId>` (lua/claim.lua), so the instant is the claim's
 * own, not the local activity's completion (which waits for the round's run starts).
 */
function priorityClaimsOf(event: HistoryEvent): PriorityClaim[] {
  const payload = event.markerRecordedEventAttributes?.details?.result?.payloads?.[0]?.data;
  if (!payload) return [];
  try {
    const result = JSON.parse(Buffer.from(payload).toString('utf8')) as { claimed?: { cardId?: string; token?: string; fromPriority?: boolean }[] };
    return (result.claimed ?? []).flatMap((card) => {
      const at = card.fromPriority === true ? /@(\d+(?:\.\d+)?):[^:]+$/.exec(card.token ?? '')?.[1] : undefined;
      return card.cardId === undefined || at === undefined ? [] : [{ cardId: card.cardId, claimedAt: Number(at) }];
    });
  } catch {
    return [];
  }
}

/** Gaps counted above these lengths (ms). */
const GAP_THRESHOLDS_MS = [2000, 3000, 10_000];

export async function schedulerRounds(client: Client, workflowId: string, from: Date, to: Date): Promise<SchedulerRounds> {
  const runs = await runChain(client, workflowId, from);
  const claims: number[] = [];
  const priorityClaims: PriorityClaim[] = [];
  const inWindow: HistoryEvent[] = [];
  let continuedAsNew = 0;
  for (const run of runs.reverse()) {
    for (const event of run.events) {
      const at = eventMs(event);
      if (at >= from.getTime() && at < to.getTime()) {
        inWindow.push(event);
        if (event.workflowExecutionStartedEventAttributes) continuedAsNew += 1;
      }
      const activity = localActivity(event);
      if (activity?.type === CLAIM_ACTIVITY) {
        claims.push(activity.at);
        priorityClaims.push(...priorityClaimsOf(event));
      }
    }
  }
  claims.sort((a, b) => a - b);
  // Gaps that overlap the window, the one from the last round to the window's end included (a stall at the end).
  const gaps: { from: number; ms: number }[] = [];
  for (let i = 1; i < claims.length; i += 1) {
    const [a, b] = [claims[i - 1]!, claims[i]!];
    if (b > from.getTime() && a < to.getTime()) gaps.push({ from: a, ms: b - a });
  }
  const last = claims.at(-1);
  if (last !== undefined && last < to.getTime()) gaps.push({ from: last, ms: to.getTime() - last });
  // No round at all: the whole window is one gap.
  if (last === undefined) gaps.push({ from: from.getTime(), ms: to.getTime() - from.getTime() });
  const longest = gaps.reduce<{ from: number; ms: number } | undefined>((max, gap) => (max === undefined || gap.ms > max.ms ? gap : max), undefined);
  return {
    workflowId,
    rounds: claims.filter((at) => at >= from.getTime() && at < to.getTime()).length,
    continuedAsNew,
    longestGapMs: round(longest?.ms ?? 0),
    longestGapFrom: longest ? new Date(longest.from).toISOString() : null,
    gapsOverMs: Object.fromEntries(GAP_THRESHOLDS_MS.map((limit) => [String(limit), gaps.filter((gap) => gap.ms > limit).length])),
    counts: countEvents(inWindow, emptyCounts()),
    priorityClaims,
  };
}
