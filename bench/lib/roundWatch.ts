/**
 * Claim rounds of one account as a bench sees them (the burst and sweep scenarios): each claim round
 * stamps its own time in the `cardpoller_scheduler_last_round_timestamp_seconds` gauge (either
 * loop; the bench process's registry), read every {@link SAMPLE_EVERY_MS} ms, so a gap is never seen
 * shorter than it was and late by at most the longest interval between two reads (reported). The
 * activity loop's published view (its round counter) is sampled beside it as a cross-check.
 */
import type { BenchStack } from './stack.js';
import { round, sleep } from './stats.js';
import type { SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';

/** The round gauge and the loop view are read this often: the gap figure is late by at most one such interval (its bound is reported). */
export const SAMPLE_EVERY_MS = 100;
export const ROUND_GAP_METRIC = 'cardpoller_scheduler_last_round_timestamp_seconds';
/** What held the account's last round back (src/runtime/metrics.ts: 1 for the factor of its latest round). */
export const LIMITED_BY_METRIC = 'cardpoller_limited_by';

export interface RoundSamples {
  /** Every distinct round time the gauge showed (ms, the round's own stamp). */
  readonly gaugeRounds: number[];
  /** When the loop view's round counter was seen to change (activity loop). */
  readonly viewChanges: number[];
  /** Per sample: what held the account's latest round back (the limited-by gauge). */
  readonly limitedBy: { readonly at: number; readonly factor: string }[];
  /** Samples whose loop view said `idle` (a sleeping loop runs no round: its gap is no stall). */
  idleSamples: number;
  samples: number;
  /** The longest time between two samples: how late a gap's end may be seen. */
  longestSampleIntervalMs: number;
}

export interface Gap {
  readonly ms: number;
  readonly from: string | null;
  readonly rounds: number;
}

/** Reads the round gauge (and the loop view) of one account every {@link SAMPLE_EVERY_MS} until stopped. */
export function watchRounds(stack: BenchStack, carrierId: string, loop: SchedulerLoop): { stop: () => Promise<RoundSamples> } {
  const samples: RoundSamples = { gaugeRounds: [], viewChanges: [], limitedBy: [], idleSamples: 0, samples: 0, longestSampleIntervalMs: 0 };
  const seen = new Set<number>();
  let lastViewRounds: number | undefined;
  let lastSampleAt: number | undefined;
  let watching = true;
  const sampleGauge = async (at: number): Promise<void> => {
    const factor = (await stack.deps.registry.getSingleMetric(LIMITED_BY_METRIC)?.get())?.values.find(
      (value) => value.labels.carrier === carrierId && value.value === 1,
    )?.labels.factor;
    if (factor !== undefined) samples.limitedBy.push({ at, factor: String(factor) });
    const metric = stack.deps.registry.getSingleMetric(ROUND_GAP_METRIC);
    if (!metric) return;
    for (const value of (await metric.get()).values) {
      if (value.labels.carrier !== carrierId) continue;
      const at = Math.round(value.value * 1000);
      if (!seen.has(at)) {
        seen.add(at);
        samples.gaugeRounds.push(at);
      }
    }
  };
  const sampleView = async (at: number): Promise<void> => {
    const raw = await stack.deps.store.loopView(carrierId).catch(() => null);
    if (raw === null) return;
    const view = JSON.parse(raw) as { rounds?: number; mode?: string };
    if (view.mode === 'idle') samples.idleSamples += 1;
    if (typeof view.rounds === 'number' && view.rounds !== lastViewRounds) {
      if (lastViewRounds !== undefined) samples.viewChanges.push(at);
      lastViewRounds = view.rounds;
    }
  };
  const run = (async () => {
    while (watching) {
      const at = Date.now();
      if (lastSampleAt !== undefined) samples.longestSampleIntervalMs = Math.max(samples.longestSampleIntervalMs, at - lastSampleAt);
      lastSampleAt = at;
      samples.samples += 1;
      await Promise.all([sampleGauge(at), loop === 'activity' ? sampleView(at) : Promise.resolve()]);
      await sleep(Math.max(0, at + SAMPLE_EVERY_MS - Date.now()));
    }
  })();
  return {
    stop: async () => {
      watching = false;
      await run;
      samples.gaugeRounds.sort((a, b) => a - b);
      return samples;
    },
  };
}

/** The longest gap between rounds that overlaps [from, to], the last round to `to` included; no round at all: the whole span. */
export function longestGap(times: readonly number[], from: number, to: number): Gap {
  let longest = { ms: 0, from: from };
  const consider = (a: number, b: number): void => {
    if (b > from && a < to && b - a > longest.ms) longest = { ms: b - a, from: a };
  };
  for (let i = 1; i < times.length; i += 1) consider(times[i - 1]!, times[i]!);
  const last = [...times].reverse().find((at) => at < to);
  if (last === undefined) longest = { ms: to - from, from };
  else consider(last, to);
  return { ms: round(longest.ms), from: new Date(longest.from).toISOString(), rounds: times.filter((at) => at >= from && at < to).length };
}
