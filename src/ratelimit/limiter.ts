/**
 * Shared rate limiter: one per (carrier account, rate-limit group), state in Redis (docs/design.md,
 * 'Limiter'; lua/rateLimit.lua). Any number of processes using it together never exceed the group's
 * QPS in any sliding one-second window.
 *
 * Wait mode: {@link RedisRateLimiter.acquire} reserves the earliest slot before the caller's deadline
 * and sleeps exactly until it (no polling); when the earliest slot lies beyond the deadline it
 * answers at once with a rate-limit deferral, a normal outcome, not an error.
 *
 * The limit holds at arrival, not only at the grant: a slot counts until slot + margin, and a
 * call not sent by then (woken late, or queued for a socket) gives the slot back and asks again
 * ({@link RedisRateLimiter.giveBack}). The margin follows this process's measured grant-to-send
 * delay (src/ratelimit/sendDelay.ts) instead of a fixed 100 ms.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '../redis/connection.js';
import { accountKeys } from '../redis/keys.js';
import { callScript, registerScripts } from '../redis/scriptLoader.js';
import { DEFAULT_PUSHBACK, type PushbackSettings } from './pushback.js';
import { ARRIVAL_ALLOWANCE_MS, MAX_WINDOW_MARGIN_MS, MIN_WINDOW_MARGIN_MS, SendDelays } from './sendDelay.js';

const SCRIPT = 'rateLimit';
/** The carrier's window: its limits are calls per second. */
const ONE_SECOND_MS = 1000;
/**
 * A waiter confirms its slot at most this long before it, then waits out the rest. Pushback spares
 * reservations due this soon (lua/rateLimit.lua COMMIT_LEAD, which must not be smaller), so a
 * confirmed slot stays valid.
 */
const CONFIRM_LEAD_MS = 20;
/**
 * Margin before any grant-to-send delay has been measured: the cap. Grant (in Redis) and arrival
 * at the carrier differ by a few ms per call (event loop, network), tens of ms on a loaded machine
 * (measured: up to ~60 ms with 4 busy processes on 2 CPUs). The measured margin is usually far
 * smaller (floor 10 ms); calls later than it get a new slot instead of a wider window for all.
 */
export const DEFAULT_WINDOW_MARGIN_MS = MAX_WINDOW_MARGIN_MS;

/** Resolves the configured QPS of a group (from the account's configuration). */
export type QpsResolver = (carrierId: string, group: string) => number | Promise<number>;

export interface RateLimiterOptions {
  readonly redis: RedisConnection;
  /** Key namespace (empty in production, per test otherwise). */
  readonly namespace: string;
  readonly qps: QpsResolver;
  /** A fixed margin in [10, 100] ms (tests); absent = adapted to the measured grant-to-send delay. */
  readonly windowMarginMs?: number;
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

/** A granted slot, in this process's clock: send the call in [slotAt, sendBy], or give it back. */
export interface GrantedSlot {
  readonly carrierId: string;
  readonly group: string;
  /** The slot's member in the group's window ('<margin>:<uuid>'). */
  readonly callId: string;
  /** Earliest local time the slot can be (epoch ms): delays measured from it are never too small. */
  readonly slotAt: number;
  /** Latest local time (epoch ms) the call may be sent: slot + margin − arrival allowance. */
  readonly sendBy: number;
  /**
   * The slot as the limiter granted it, on its own clock (Redis TIME, floored): what its window
   * decides on. Only comparable with other slots' (tests check the window with it).
   */
  readonly limiterSlotMs: number;
}

export type AcquireResult =
  | { readonly outcome: 'granted'; readonly waitedMs: number; readonly effectiveRate: number; readonly slot: GrantedSlot }
  /** The next slot lies beyond the deadline: re-due the card shortly, count nothing as failure. */
  | { readonly outcome: 'deferred'; readonly waitedMs: number; readonly nextSlotInMs: number };

export interface AttemptResult {
  readonly granted: boolean;
  /** Granted: sleep this long, then call (0 = now). Not granted: time until the earliest slot. */
  readonly waitMs: number;
  readonly effectiveRate: number;
  readonly remaining: number;
  readonly pausedUntilMs: number;
  /** Calls holding a reserved slot after now (waiting for it); exact from peek (inspect, roundBudget). */
  readonly ahead: number;
  /** The limiter's clock (Redis TIME, or the injected one) when it answered. */
  readonly nowMs: number;
  /** Granted acquire: the slot on the limiter's clock (floored); 0 otherwise. */
  readonly slotMs: number;
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
  /** Slots given back unsent: the waiter woke too late, or the call waited too long for a socket. */
  lateSlots: number;
  /** Margin (ms) the next grant gets: how long after its slot a call may still reach the carrier. */
  windowMarginMs: number;
}

type ScriptOp = 'acquire' | 'confirm' | 'cancel' | 'peek' | 'pushback';
type ScriptExtra = { readonly callId?: string; readonly retryAfterMs?: number; readonly maxWaitMs?: number };

export class RedisRateLimiter {
  private readonly redis: RedisConnection;
  private readonly namespace: string;
  private readonly resolveQps: QpsResolver;
  private readonly fixedMarginMs: number | undefined;
  private readonly delays = new SendDelays();
  private readonly pushback: PushbackSettings;
  private readonly clock: (() => number) | undefined;
  private readonly onEvent: ((event: LimiterEvent) => void) | undefined;
  private readonly counters: Omit<LimiterStats, 'windowMarginMs'> = {
    granted: 0,
    deferred: 0,
    waits: 0,
    waitedMsTotal: 0,
    pushbacksApplied: 0,
    pushbacksIgnored: 0,
    lateSlots: 0,
  };

  constructor(options: RateLimiterOptions) {
    this.redis = options.redis;
    this.namespace = options.namespace;
    this.resolveQps = options.qps;
    // Below the floor nothing could be sent in time (the arrival allowance alone takes 5 ms).
    if (options.windowMarginMs !== undefined && !(options.windowMarginMs >= MIN_WINDOW_MARGIN_MS && options.windowMarginMs <= MAX_WINDOW_MARGIN_MS)) {
      throw new RangeError(`windowMarginMs must be within [${MIN_WINDOW_MARGIN_MS}, ${MAX_WINDOW_MARGIN_MS}], got ${options.windowMarginMs}`);
    }
    this.fixedMarginMs = options.windowMarginMs === undefined ? undefined : Math.round(options.windowMarginMs);
    this.pushback = { ...DEFAULT_PUSHBACK, ...options.pushback };
    this.clock = options.now;
    this.onEvent = options.onEvent;
    registerScripts(this.redis, [{ name: SCRIPT, numberOfKeys: 2 }]);
  }

  /**
   * Reserves the group's earliest slot if it comes before `deadline`, sleeps until it, and
   * confirms it (carrier pushback may void reservations meanwhile; then it reserves again).
   * One script call per acquire in the common case: waiters never poll. The caller sends within
   * the returned slot ({@link sent}) or gives it back ({@link giveBack}).
   */
  async acquire(carrierId: string, group: string, options: AcquireOptions): Promise<AcquireResult> {
    const started = Date.now();
    for (;;) {
      options.signal?.throwIfAborted();
      const margin = this.windowMarginMs();
      const callId = `${margin}:${randomUUID()}`;
      const { reply: attempt, askedAt } = await this.script('acquire', carrierId, group, { callId, maxWaitMs: Math.max(0, options.deadline - Date.now()) });
      const repliedAt = Date.now();
      if (!attempt.granted) {
        // The slot cannot come in time: answer now rather than sleep until the deadline.
        const waitedMs = Date.now() - started;
        this.counters.deferred += 1;
        this.onEvent?.({ kind: 'deferred', carrierId, group, waitedMs });
        return { outcome: 'deferred', waitedMs, nextSlotInMs: attempt.waitMs };
      }
      // The script ran after `askedAt`: the slot is no earlier than slotAt, so delays measured from
      // it are never too small.
      let slotAt = askedAt + attempt.waitMs;
      if (attempt.waitMs > 0) {
        this.counters.waits += 1;
        this.counters.waitedMsTotal += attempt.waitMs;
        const signal = options.signal ? { signal: options.signal } : undefined;
        try {
          // The slot lies in [slotAt, repliedAt + waitMs]. Waking at the latter would add the time the
          // reply waited to be read (a busy event loop) to every call; wake early instead (at most
          // CONFIRM_LEAD_MS before the slot), confirm, and let the confirm say how far it still is.
          const wakeAt = this.clock ? repliedAt + attempt.waitMs : Math.max(slotAt, repliedAt + attempt.waitMs - CONFIRM_LEAD_MS);
          await sleep(Math.max(0, wakeAt - Date.now()), undefined, signal);
          const confirmed = await this.script('confirm', carrierId, group, { callId });
          if (!confirmed.reply.granted) continue;
          if (!this.clock) {
            // The confirm ran between its askedAt and now, (slot − its now) before the slot: the slot
            // lies in [lower, upper] locally (± 1 ms for the floored times). Not before `upper`.
            const confirmedAt = Date.now();
            const ahead = attempt.slotMs - confirmed.reply.nowMs;
            slotAt = Math.max(slotAt, confirmed.askedAt + ahead - 1);
            const upper = confirmedAt + ahead + 1;
            if (upper > Date.now()) await sleep(upper - Date.now(), undefined, signal);
          }
        } catch (error) {
          // Nothing will be sent: free the slot (not a lateness sample).
          await this.run('cancel', carrierId, group, { callId }).catch(() => undefined);
          // Surface the caller's own abort reason rather than the timer's generic AbortError.
          options.signal?.throwIfAborted();
          throw error;
        }
      }
      const slot: GrantedSlot = {
        carrierId,
        group,
        callId,
        slotAt,
        sendBy: slotAt + Math.max(0, margin - ARRIVAL_ALLOWANCE_MS),
        limiterSlotMs: attempt.slotMs,
      };
      // Ready past the slot's margin (CPU starvation, GC pause): the call could reach the carrier in
      // the next slot's window, so give the slot up and take a fresh one.
      if (attempt.waitMs > 0 && Date.now() > slot.sendBy) {
        await this.giveBack(slot);
        continue;
      }
      const waitedMs = Date.now() - started;
      this.counters.granted += 1;
      this.onEvent?.({ kind: 'granted', carrierId, group, waitedMs });
      return { outcome: 'granted', waitedMs, effectiveRate: attempt.effectiveRate, slot };
    }
  }

  /** The call of `slot` left this process at `at` (epoch ms): one sample of the grant-to-send delay. */
  sent(slot: GrantedSlot, at: number = Date.now()): void {
    this.delays.record(at - slot.slotAt);
  }

  /**
   * The call of `slot` was not sent within it and never will be: the slot is freed for others
   * (it must not be sent afterwards). Its lateness counts as a delay sample, so the margin grows
   * when calls keep missing it.
   */
  async giveBack(slot: GrantedSlot, at: number = Date.now()): Promise<void> {
    this.delays.record(at - slot.slotAt);
    this.counters.lateSlots += 1;
    await this.run('cancel', slot.carrierId, slot.group, { callId: slot.callId });
  }

  /** Margin (ms) of the next grant: fixed, or this process's measured delay within [10, 100]. */
  windowMarginMs(): number {
    return this.fixedMarginMs ?? this.delays.marginMs();
  }

  /**
   * One attempt for a slot now, or reserved at most `reserveWithinMs` ahead (its time is `waitMs`
   * from the answer); no waiting, no confirmation.
   */
  async tryAcquire(carrierId: string, group: string, reserveWithinMs = 0): Promise<AttemptResult> {
    return this.run('acquire', carrierId, group, { callId: `${this.windowMarginMs()}:${randomUUID()}`, maxWaitMs: reserveWithinMs });
  }

  /** Calls still possible this second per group (0 while paused); for the claim step. */
  async remaining(carrierId: string, groups: readonly string[]): Promise<Record<string, number>> {
    const entries = await Promise.all(groups.map(async (group) => [group, (await this.run('peek', carrierId, group, {})).remaining] as const));
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
      budget: Object.fromEntries(
        views.map(([group, view]) => [group, view.pausedUntilMs > view.nowMs ? 0 : Math.max(0, Math.floor(view.effectiveRate * seconds) - view.ahead)]),
      ),
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

  /** Counters of this process since start (granted, deferred, waits, pushbacks), and the margin. */
  stats(): Readonly<LimiterStats> {
    return { ...this.counters, windowMarginMs: this.windowMarginMs() };
  }

  private async run(op: ScriptOp, carrierId: string, group: string, extra: ScriptExtra): Promise<AttemptResult> {
    return (await this.script(op, carrierId, group, extra)).reply;
  }

  /** One script call; `askedAt` = local time right before it was sent. */
  private async script(op: ScriptOp, carrierId: string, group: string, extra: ScriptExtra): Promise<{ reply: AttemptResult; askedAt: number }> {
    const qps = await this.resolveQps(carrierId, group);
    if (!Number.isInteger(qps) || qps < 1) throw new RangeError(`QPS of ${carrierId}/${group} must be an integer >= 1, got ${qps}`);
    const windowKey = accountKeys(this.namespace, carrierId).rateLimit(group);
    const p = this.pushback;
    const askedAt = Date.now();
    const reply = (await callScript(
      this.redis,
      SCRIPT,
      [windowKey, `${windowKey}:pushback`],
      [
        op,
        this.clock ? String(this.clock()) : '',
        qps,
        ONE_SECOND_MS,
        extra.callId ?? '',
        extra.retryAfterMs === undefined ? '' : String(extra.retryAfterMs),
        p.defaultPauseMs,
        p.decreaseFactor,
        p.minRate,
        p.recoveryStepMs,
        p.probeStepMs,
        p.stateTtlMs,
        extra.maxWaitMs ?? 0,
      ],
    )) as number[];
    const [result, waitMs, effectiveRate, remaining, nowMs, pausedUntilMs, ahead, slotMs] = reply;
    return {
      askedAt,
      reply: {
        granted: result === 1,
        waitMs: waitMs ?? 0,
        effectiveRate: effectiveRate ?? qps,
        remaining: remaining ?? 0,
        pausedUntilMs: pausedUntilMs ?? 0,
        ahead: ahead ?? 0,
        nowMs: nowMs ?? 0,
        slotMs: slotMs ?? 0,
      },
    };
  }
}
