/**
 * Shared rate limiter: one per (carrier account, rate-limit group), state in Redis (DESIGN §5,
 * lua/rateLimit.lua). Any number of processes using it together never exceed the group's QPS in
 * any sliding one-second window.
 *
 * Wait mode: {@link RedisRateLimiter.acquire} reserves the earliest slot before the caller's deadline
 * and sleeps exactly until it (no polling); when the earliest slot lies beyond the deadline it
 * answers at once with a rate-limit deferral, a normal outcome, not an error.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { accountKeys } from '../redis/keys.js';
import { callScript, registerScripts } from '../redis/scriptLoader.js';
import { DEFAULT_PUSHBACK, type PushbackSettings } from './pushback.js';

const SCRIPT = 'rateLimit';
const ONE_SECOND_MS = 1000;
/**
 * Extra window length beyond one second. Grant (in Redis) and arrival at the carrier differ by a
 * few ms per call (event loop, network), tens of ms on a loaded machine (measured: up to ~60 ms with
 * 4 busy processes on 2 CPUs); the margin absorbs that jitter so the carrier's windows, measured at
 * arrival, still never see more than the rate. Costs ~9 % of the budget in steady state: zero
 * rejections matter more than the last percents (DESIGN §11: violations must be 0).
 */
export const DEFAULT_WINDOW_MARGIN_MS = 100;

/** Resolves the configured QPS of a group (from the account's configuration). */
export type QpsResolver = (carrierId: string, group: string) => number | Promise<number>;

export interface RateLimiterOptions {
  readonly redis: Redis;
  /** Key namespace (empty in production, per test otherwise). */
  readonly namespace: string;
  readonly qps: QpsResolver;
  /** @default 100 */
  readonly windowMarginMs?: number;
  /** A waiter woken later than this after its slot gives it up and re-acquires. @default margin / 2 */
  readonly maxLatenessMs?: number;
  readonly pushback?: Partial<PushbackSettings>;
  /** Test clock (epoch ms) passed to the script; absent = Redis TIME (production). */
  readonly now?: () => number;
  /** Hook for metrics (waits, deferrals, pushbacks). */
  readonly onEvent?: (event: LimiterEvent) => void;
}

export type LimiterEvent =
  | { readonly kind: 'granted'; readonly carrierId: string; readonly group: string; readonly waitedMs: number }
  | { readonly kind: 'deferred'; readonly carrierId: string; readonly group: string; readonly waitedMs: number }
  | { readonly kind: 'pushback'; readonly carrierId: string; readonly group: string; readonly applied: boolean; readonly effectiveRate: number };

export interface AcquireOptions {
  /** Latest time (epoch ms, local clock) at which the call may start. */
  readonly deadline: number;
  /** Cancels the wait; acquire then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

export type AcquireResult =
  | { readonly outcome: 'granted'; readonly waitedMs: number; readonly effectiveRate: number }
  /** The next slot lies beyond the deadline: re-due the card shortly, count nothing as failure. */
  | { readonly outcome: 'deferred'; readonly waitedMs: number; readonly nextSlotInMs: number };

export interface AttemptResult {
  readonly granted: boolean;
  /** Granted: sleep this long, then call (0 = now). Not granted: time until the earliest slot. */
  readonly waitMs: number;
  readonly effectiveRate: number;
  readonly remaining: number;
  readonly pausedUntilMs: number;
  /** Calls holding a reserved slot after now (waiting for it). */
  readonly ahead: number;
  /** The limiter's clock (Redis TIME, or the injected one) when it answered. */
  readonly nowMs: number;
}

export interface PushbackResult {
  /** False when the report belonged to a burst that already slowed the group down. */
  readonly applied: boolean;
  readonly effectiveRate: number;
  readonly pausedUntilMs: number;
}

export interface LimiterStats {
  granted: number;
  deferred: number;
  /** Grants that slept until a reserved slot. */
  waits: number;
  waitedMsTotal: number;
  pushbacksApplied: number;
  pushbacksIgnored: number;
  /** Reserved slots given up because the waiter woke too late. */
  lateSlots: number;
}

export class RedisRateLimiter {
  private readonly redis: Redis;
  private readonly namespace: string;
  private readonly resolveQps: QpsResolver;
  private readonly windowMs: number;
  private readonly maxLatenessMs: number;
  private readonly pushback: PushbackSettings;
  private readonly clock: (() => number) | undefined;
  private readonly onEvent: ((event: LimiterEvent) => void) | undefined;
  private readonly counters: LimiterStats = { granted: 0, deferred: 0, waits: 0, waitedMsTotal: 0, pushbacksApplied: 0, pushbacksIgnored: 0, lateSlots: 0 };

  constructor(options: RateLimiterOptions) {
    this.redis = options.redis;
    this.namespace = options.namespace;
    this.resolveQps = options.qps;
    const margin = options.windowMarginMs ?? DEFAULT_WINDOW_MARGIN_MS;
    this.windowMs = ONE_SECOND_MS + margin;
    this.maxLatenessMs = options.maxLatenessMs ?? margin / 2;
    this.pushback = { ...DEFAULT_PUSHBACK, ...options.pushback };
    this.clock = options.now;
    this.onEvent = options.onEvent;
    registerScripts(this.redis, [{ name: SCRIPT, numberOfKeys: 2 }]);
  }

  /**
   * Reserves the group's earliest slot if it comes before `deadline`, sleeps until it, and
   * confirms it (carrier pushback may void reservations meanwhile; then it reserves again).
   * One script call per acquire in the common case: waiters never poll.
   */
  async acquire(carrierId: string, group: string, options: AcquireOptions): Promise<AcquireResult> {
    const started = Date.now();
    for (;;) {
      options.signal?.throwIfAborted();
      const callId = randomUUID();
      const attempt = await this.run('acquire', carrierId, group, { callId, maxWaitMs: Math.max(0, options.deadline - Date.now()) });
      const replyAt = Date.now();
      if (!attempt.granted) {
        // The slot cannot come in time: answer now rather than sleep until the deadline.
        const waitedMs = Date.now() - started;
        this.counters.deferred += 1;
        this.onEvent?.({ kind: 'deferred', carrierId, group, waitedMs });
        return { outcome: 'deferred', waitedMs, nextSlotInMs: attempt.waitMs };
      }
      if (attempt.waitMs > 0) {
        this.counters.waits += 1;
        this.counters.waitedMsTotal += attempt.waitMs;
        try {
          await sleep(attempt.waitMs, undefined, options.signal ? { signal: options.signal } : undefined);
        } catch (error) {
          // Surface the caller's own abort reason rather than the timer's generic AbortError.
          options.signal?.throwIfAborted();
          throw error;
        }
        if (!(await this.run('confirm', carrierId, group, { callId })).granted) continue;
        // Ready far past the slot (CPU starvation, GC pause): calling now could land in the next
        // slot's window at the carrier, so give the slot up and take a fresh one.
        if (Date.now() - (replyAt + attempt.waitMs) > this.maxLatenessMs) {
          this.counters.lateSlots += 1;
          continue;
        }
      }
      const waitedMs = Date.now() - started;
      this.counters.granted += 1;
      this.onEvent?.({ kind: 'granted', carrierId, group, waitedMs });
      return { outcome: 'granted', waitedMs, effectiveRate: attempt.effectiveRate };
    }
  }

  /** One attempt for a slot now (no reservation ahead, no waiting). */
  async tryAcquire(carrierId: string, group: string): Promise<AttemptResult> {
    return this.run('acquire', carrierId, group, { callId: randomUUID(), maxWaitMs: 0 });
  }

  /** Calls still possible this second per group (0 while paused); for the claim step. */
  async remaining(carrierId: string, groups: readonly string[]): Promise<Record<string, number>> {
    const entries = await Promise.all(
      groups.map(async (group) => [group, (await this.run('peek', carrierId, group, {})).remaining] as const),
    );
    return Object.fromEntries(entries);
  }

  /**
   * Calls per group a claim round may plan for the next `seconds`: the effective rate times the
   * seconds, minus the calls already waiting for a reserved slot (0 while paused). Not `remaining`:
   * the window still holds the previous round's calls, and a tick shorter than the window would
   * then give each round only what the previous one left, settling near half the budget.
   */
  async roundBudget(carrierId: string, groups: readonly string[], seconds: number): Promise<Record<string, number>> {
    return (await this.roundView(carrierId, groups, seconds)).budget;
  }

  /** {@link roundBudget} and each group's effective rate, from one peek per group. */
  async roundView(carrierId: string, groups: readonly string[], seconds: number): Promise<{ budget: Record<string, number>; rates: Record<string, number> }> {
    const views = await Promise.all(groups.map(async (group) => [group, await this.run('peek', carrierId, group, {})] as const));
    return {
      budget: Object.fromEntries(views.map(([group, view]) => [group, view.pausedUntilMs > view.nowMs ? 0 : Math.max(0, Math.floor(view.effectiveRate * seconds) - view.ahead)])),
      rates: Object.fromEntries(views.map(([group, view]) => [group, view.effectiveRate])),
    };
  }

  /** The rate the group runs at now: the configured one, or lower after carrier pushback. */
  async effectiveRate(carrierId: string, group: string): Promise<number> {
    return (await this.run('peek', carrierId, group, {})).effectiveRate;
  }

  /** Full view of a group (effective rate, remaining, pause), e.g. for the account status. */
  async inspect(carrierId: string, group: string): Promise<AttemptResult> {
    return this.run('peek', carrierId, group, {});
  }

  /** The carrier answered `rate_limited`: pause the group and lower its rate (AIMD). */
  async reportRateLimited(carrierId: string, group: string, retryAfterMs?: number): Promise<PushbackResult> {
    const pauseMs = retryAfterMs === undefined ? undefined : Math.min(retryAfterMs, this.pushback.maxPauseMs);
    const result = await this.run('pushback', carrierId, group, { retryAfterMs: pauseMs });
    const applied = result.granted;
    if (applied) this.counters.pushbacksApplied += 1;
    else this.counters.pushbacksIgnored += 1;
    this.onEvent?.({ kind: 'pushback', carrierId, group, applied, effectiveRate: result.effectiveRate });
    return { applied, effectiveRate: result.effectiveRate, pausedUntilMs: result.pausedUntilMs };
  }

  /** Counters of this process since start (granted, deferred, waits, pushbacks). */
  stats(): Readonly<LimiterStats> {
    return { ...this.counters };
  }

  private async run(
    op: 'acquire' | 'confirm' | 'peek' | 'pushback',
    carrierId: string,
    group: string,
    extra: { readonly callId?: string; readonly retryAfterMs?: number; readonly maxWaitMs?: number },
  ): Promise<AttemptResult> {
    const qps = await this.resolveQps(carrierId, group);
    if (!Number.isInteger(qps) || qps < 1) throw new RangeError(`QPS of ${carrierId}/${group} must be an integer >= 1, got ${qps}`);
    const windowKey = accountKeys(this.namespace, carrierId).rateLimit(group);
    const p = this.pushback;
    const reply = (await callScript(this.redis, SCRIPT, [windowKey, `${windowKey}:pushback`], [
      op,
      this.clock ? String(this.clock()) : '',
      qps,
      this.windowMs,
      extra.callId ?? '',
      extra.retryAfterMs === undefined ? '' : String(extra.retryAfterMs),
      p.defaultPauseMs,
      p.decreaseFactor,
      p.minRate,
      p.recoveryStepMs,
      p.probeStepMs,
      p.stateTtlMs,
      extra.maxWaitMs ?? 0,
    ])) as number[];
    const [result, waitMs, effectiveRate, remaining, nowMs, pausedUntilMs, ahead] = reply;
    return {
      granted: result === 1,
      waitMs: waitMs ?? 0,
      effectiveRate: effectiveRate ?? qps,
      remaining: remaining ?? 0,
      pausedUntilMs: pausedUntilMs ?? 0,
      ahead: ahead ?? 0,
      nowMs: nowMs ?? 0,
    };
  }
}
