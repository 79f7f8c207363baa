/**
 * The simulator's world: carrier accounts (enforced limits, latency, fault injection) and cards
 * (network state with delayed transitions, growing data usage, real-name status), plus the exact
 * counters that `GET /sim/stats` reports.
 */
import { z } from 'zod';
import { GATEWAY_CHECK_TYPES, type GatewayCheckType } from '../workflow-safe/checkTypes.js';
import type { NetworkState, RealnameState } from '../gateway/contract.js';
import { createPrng, hashSeed } from './random.js';
import { SlidingWindow } from './slidingWindow.js';
import type { ProcessMemory } from '../runtime/liveHeap.js';

const ONE_SECOND_MS = 1000;

const rate = z.number().min(0).max(1);

/** Body of `PUT /sim/accounts/:account` (the simulated account's groups, latency and error rates, plus test hooks). Omitted fields keep their value. */
export const accountUpdateSchema = z.object({
  groups: z.record(z.string().min(1), z.number().positive()).optional(),
  typeGroups: z.partialRecord(z.enum(GATEWAY_CHECK_TYPES), z.string().min(1)).optional(),
  latencyMs: z.object({ p50: z.number().nonnegative(), p99: z.number().nonnegative() }).optional(),
  /** Share of accepted calls answered with a transient carrier error (503). */
  errorRate: rate.optional(),
  /** Share of accepted calls never answered in time (held for `timeoutHoldMs`, then 504). */
  timeoutRate: rate.optional(),
  /** Test hook: share of accepted calls answered 200 with a body that breaks the contract. */
  malformedRate: rate.optional(),
  /** Share of realname calls after which the card's real-name status flips. */
  realnameFlipRate: rate.optional(),
  timeoutHoldMs: z.number().int().nonnegative().optional(),
});
export type AccountUpdate = z.infer<typeof accountUpdateSchema>;

/** Body of `POST /sim/cards/:iccid/state`. */
export const cardStateUpdateSchema = z.object({
  network: z.enum(['online', 'offline']).optional(),
  /** Delay before `network` takes effect (stop/resume take a while at the carrier). */
  afterMs: z.number().int().nonnegative().optional(),
  realname: z.enum(['verified', 'unverified']).optional(),
  usageKb: z.number().nonnegative().optional(),
});
export type CardStateUpdate = z.infer<typeof cardStateUpdateSchema>;

export interface AccountSettings {
  groups: Record<string, number>;
  typeGroups: Partial<Record<GatewayCheckType, string>>;
  latencyMs: { p50: number; p99: number };
  errorRate: number;
  timeoutRate: number;
  malformedRate: number;
  realnameFlipRate: number;
  timeoutHoldMs: number;
}

/** Unknown accounts get these: one generous group for every type, fast answers, no faults. */
export const DEFAULT_ACCOUNT: AccountSettings = {
  groups: { default: 1000 },
  typeGroups: { card_status: 'default', carddata: 'default', realname: 'default' },
  latencyMs: { p50: 5, p99: 20 },
  errorRate: 0,
  timeoutRate: 0,
  malformedRate: 0,
  realnameFlipRate: 0,
  timeoutHoldMs: 30_000,
};

export interface GroupCounters {
  /** Calls accepted (within the limit). */
  calls: number;
  /** Calls rejected as over the limit. */
  rejected: number;
  /** Calls answered with an injected transient error or held as a timeout. */
  faults: number;
  /** Accepted calls in the last second; enforcement counts these. */
  readonly accepted: SlidingWindow;
  /** Every arriving call (accepted or rejected); `maxPerSecond` is its maximum. */
  readonly arrivals: SlidingWindow;
}

export interface SimAccount {
  settings: AccountSettings;
  readonly groups: Map<string, GroupCounters>;
}

export interface SimCard {
  network: NetworkState;
  pendingNetwork: { readonly state: NetworkState; readonly at: number } | undefined;
  realname: RealnameState;
  usageBaseKb: number;
  usageBaseAt: number;
  readonly usageKbPerSec: number;
  calls: number;
  /** Calls answered with an observation (200) on a connection still open: what the caller can have learned. */
  answered: number;
  inflight: number;
  maxConcurrent: number;
  /** Arrival (epoch ms) of the latest call: benchmarks time request → first call with it. */
  lastCallAt: number | undefined;
}

export type Admission =
  | { readonly admitted: true; readonly group: string; readonly counters: GroupCounters }
  | { readonly admitted: false; readonly group: string; readonly retryAfterMs: number };

export class SimWorld {
  readonly accounts = new Map<string, SimAccount>();
  readonly cards = new Map<string, SimCard>();
  random: () => number;

  constructor(private seed: number) {
    this.random = createPrng(seed);
  }

  reset(seed: number = this.seed): void {
    this.seed = seed;
    this.random = createPrng(seed);
    this.accounts.clear();
    this.cards.clear();
  }

  account(name: string): SimAccount {
    let account = this.accounts.get(name);
    if (!account) {
      account = { settings: structuredClone(DEFAULT_ACCOUNT), groups: new Map() };
      this.accounts.set(name, account);
    }
    return account;
  }

  updateAccount(name: string, update: AccountUpdate): AccountSettings {
    const account = this.account(name);
    const s = account.settings;
    if (update.groups) s.groups = { ...update.groups };
    if (update.typeGroups) s.typeGroups = { ...update.typeGroups };
    if (update.latencyMs) s.latencyMs = { ...update.latencyMs };
    if (update.errorRate !== undefined) s.errorRate = update.errorRate;
    if (update.timeoutRate !== undefined) s.timeoutRate = update.timeoutRate;
    if (update.malformedRate !== undefined) s.malformedRate = update.malformedRate;
    if (update.realnameFlipRate !== undefined) s.realnameFlipRate = update.realnameFlipRate;
    if (update.timeoutHoldMs !== undefined) s.timeoutHoldMs = update.timeoutHoldMs;
    return s;
  }

  /**
   * Carrier-side QPS enforcement at arrival (`now` = monotonic ms): a call is accepted while fewer
   * than the group's QPS calls were accepted in the last second. Types without a group, or groups
   * without a limit, are counted but not limited. `call` names the arrival in {@link GroupStats.busiestSecond}.
   */
  admit(accountName: string, type: GatewayCheckType, now: number, call = ''): Admission {
    const account = this.account(accountName);
    const group = account.settings.typeGroups[type] ?? 'default';
    let counters = account.groups.get(group);
    if (!counters) {
      counters = { calls: 0, rejected: 0, faults: 0, accepted: new SlidingWindow(ONE_SECOND_MS), arrivals: new SlidingWindow(ONE_SECOND_MS) };
      account.groups.set(group, counters);
    }
    counters.arrivals.record(now, call);
    const limit = account.settings.groups[group];
    if (limit !== undefined && counters.accepted.count(now) >= limit) {
      counters.rejected += 1;
      const oldest = counters.accepted.oldest(now) ?? now;
      return { admitted: false, group, retryAfterMs: Math.max(1, Math.ceil(oldest + ONE_SECOND_MS - now)) };
    }
    counters.accepted.record(now);
    counters.calls += 1;
    return { admitted: true, group, counters };
  }

  /** The card, created on first sight with a state derived from (seed, iccid) only. */
  card(iccid: string): SimCard {
    let card = this.cards.get(iccid);
    if (!card) {
      const random = createPrng(hashSeed(this.seed, iccid));
      card = {
        network: random() < 0.9 ? 'online' : 'offline',
        pendingNetwork: undefined,
        realname: random() < 0.8 ? 'verified' : 'unverified',
        usageBaseKb: Math.floor(random() * 500_000),
        usageBaseAt: Date.now(),
        usageKbPerSec: Math.round(random() * 50 * 100) / 100,
        calls: 0,
        answered: 0,
        inflight: 0,
        maxConcurrent: 0,
        lastCallAt: undefined,
      };
      this.cards.set(iccid, card);
    }
    // Apply a due stop/resume transition lazily: no timers to clean up.
    if (card.pendingNetwork && card.pendingNetwork.at <= Date.now()) {
      card.network = card.pendingNetwork.state;
      card.pendingNetwork = undefined;
    }
    return card;
  }

  updateCard(iccid: string, update: CardStateUpdate): SimCard {
    const card = this.card(iccid);
    const now = Date.now();
    if (update.network !== undefined) {
      if ((update.afterMs ?? 0) > 0) card.pendingNetwork = { state: update.network, at: now + (update.afterMs ?? 0) };
      else {
        card.network = update.network;
        card.pendingNetwork = undefined;
      }
    }
    if (update.realname !== undefined) card.realname = update.realname;
    if (update.usageKb !== undefined) {
      card.usageBaseKb = update.usageKb;
      card.usageBaseAt = now;
    }
    return this.card(iccid);
  }

  usageKb(card: SimCard): number {
    return Math.floor(card.usageBaseKb + (card.usageKbPerSec * (Date.now() - card.usageBaseAt)) / ONE_SECOND_MS);
  }

  stats(includeCards: boolean): SimStats {
    const accounts: SimStats['accounts'] = {};
    for (const [name, account] of this.accounts) {
      const groups: Record<string, GroupStats> = {};
      for (const [group, c] of account.groups) {
        groups[group] = {
          calls: c.calls,
          rejected: c.rejected,
          maxPerSecond: c.arrivals.max,
          maxAcceptedPerSecond: c.accepted.max,
          faults: c.faults,
          // Arrival times are monotonic; epoch ms lets a caller set them beside its own send times.
          busiestSecond: c.arrivals.worst.map((entry) => ({ call: entry.label, arrivedAtMs: Math.round((performance.timeOrigin + entry.at) * 10) / 10 })),
        };
      }
      accounts[name] = { groups };
    }
    const stats: SimStats = { accounts };
    if (includeCards) {
      const cards: NonNullable<SimStats['cards']> = {};
      for (const [iccid, card] of this.cards) {
        cards[iccid] = {
          calls: card.calls,
          answered: card.answered,
          maxConcurrent: card.maxConcurrent,
          inflight: card.inflight,
          ...(card.lastCallAt === undefined ? {} : { lastCallAt: card.lastCallAt }),
        };
      }
      stats.cards = cards;
    }
    return stats;
  }
}

export interface GroupStats {
  readonly calls: number;
  readonly rejected: number;
  /** Most calls (accepted + rejected) that arrived in any sliding one-second window. */
  readonly maxPerSecond: number;
  /** Most accepted calls in any sliding one-second window (never above the enforced limit). */
  readonly maxAcceptedPerSecond: number;
  readonly faults: number;
  /**
   * The calls of the first one-second window that held `maxPerSecond` of them: `call` is the
   * request's `requestId`, or `<iccid>#<n>` (the card's n-th call here) without one; `arrivedAtMs`
   * when the handler saw it (epoch ms).
   * Set beside the caller's send times, it tells a limiter that let too many go from an
   * instrument that read them late.
   */
  readonly busiestSecond: readonly { readonly call: string; readonly arrivedAtMs: number }[];
}

export interface SimStats {
  accounts: Record<string, { groups: Record<string, GroupStats> }>;
  /**
   * `calls`: every call of the card that arrived (rejected ones too); `answered`: those answered with
   * an observation; `inflight`: the card's calls not answered yet; `lastCallAt`: epoch ms of its
   * latest call (absent before its first).
   */
  cards?: Record<string, { calls: number; answered: number; maxConcurrent: number; inflight: number; lastCallAt?: number }>;
  /** Memory of the process serving the simulator (src/runtime/liveHeap.ts): added by the server. */
  process?: ProcessMemory;
}
