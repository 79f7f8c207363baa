/**
 * The simulator's world: carrier accounts (enforced limits, latency, fault injection) and cards
 * (network state with delayed transitions, growing data usage, real-name status), plus the exact
 * counters that `GET /sim/stats` reports.
 *
 * Freshness ground truth: every change of a card's `card_status` or `realname` at the "carrier"
 * (drift at an account's rate, a state set through `/sim/cards`, a delayed stop/resume taking
 * effect, a real-name flip) is stamped, and the first answer that carries it counts as the product
 * having learned it: its staleness is that answer's time minus the change's. A change overtaken by
 * the next one before any answer carried it was never learned (superseded). A pushed event
 * (src/simulator/push.ts) that carried a change and was answered 2xx learns it the same way.
 */
import { z } from 'zod';
import { GATEWAY_CHECK_TYPES, type GatewayCheckType } from '../workflow-safe/checkTypes.js';
import type { NetworkState, ObservationByType, RealnameState } from '../gateway/contract.js';
import { createPrng, hashSeed } from './random.js';
import { SlidingWindow } from './slidingWindow.js';
import type { ProcessMemory } from '../runtime/liveHeap.js';

const ONE_SECOND_MS = 1000;

const rate = z.number().min(0).max(1);

/** Check types whose answer is a discrete state that changes at the carrier (carddata grows continuously). */
export const CHANGING_TYPES = ['card_status', 'realname'] as const satisfies readonly GatewayCheckType[];
export type ChangingType = (typeof CHANGING_TYPES)[number];
/** Staleness samples kept per account and type (beyond them, changes are still counted). */
const MAX_STALENESS_SAMPLES = 200_000;

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
  /**
   * Drift: the share of the account's cards whose state of a type changes by itself per hour
   * (0.01 = 1 % of its cards an hour). The account's cards are those that called it or were
   * registered with `POST /sim/accounts/:account/cards`.
   */
  changeRatePerHour: z.partialRecord(z.enum(CHANGING_TYPES), z.number().nonnegative().max(3600)).optional(),
});
export type AccountUpdate = z.infer<typeof accountUpdateSchema>;

/** Body of `POST /sim/accounts/:account/cards`: cards of the account before their first call (drift picks among them). */
export const accountCardsSchema = z.object({ iccids: z.array(z.string().min(1)).min(1).max(100_000) });

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
  changeRatePerHour: Partial<Record<ChangingType, number>>;
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
  changeRatePerHour: {},
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

/** What became of an account's changes of one type. */
interface FreshnessCounters {
  changes: number;
  learned: number;
  superseded: number;
  /** ms from each learned change to the first answer that carried it (the first MAX_STALENESS_SAMPLES). */
  readonly samplesMs: number[];
}

/** What became of the events pushed for an account (each event counted, not requests). */
export interface PushCounters {
  /** Events made for the account's changes (each once, a batch's as they join its window). */
  sent: number;
  /** Events of requests answered 2xx. */
  delivered: number;
  /** Events of requests refused for good (a 4xx other than 429, a 3xx): not retried. */
  failed: number;
  /** Re-sends: an event sent again after a network error, a timeout, a 5xx or a 429, once per re-send. */
  retried: number;
  /** Events given up: not delivered within a minute, or still waiting when pushing stopped. */
  dropped: number;
}

/** A change of a card's state at the carrier, as {@link SimWorld.onChange} reports it. */
export interface CardChange {
  readonly card: SimCard;
  /** The card's account when it changed (a card no account knows yet reports no change). */
  readonly account: string;
  readonly type: GatewayCheckType;
  /** When it changed (epoch ms): the instant freshness stamps and answers carry as `changedAt`. */
  readonly at: number;
  /** Which change of the card it is, for `card_status`/`realname` (see {@link SimWorld.pushDelivered}); carddata has none. */
  readonly serial: number | undefined;
}

export interface SimAccount {
  settings: AccountSettings;
  readonly groups: Map<string, GroupCounters>;
  /** ICCIDs of the account's cards, in the order they joined it: drift picks among them. */
  readonly cards: string[];
  readonly freshness: Partial<Record<ChangingType, FreshnessCounters>>;
  /** Drift owed but not yet applied (fractions of a change), per type; and when drift last ran. */
  readonly driftCarry: Partial<Record<ChangingType, number>>;
  driftAt: number | undefined;
  /** Set once the account was told to push its changes (`PUT /sim/accounts/:account/push`). */
  push: PushCounters | undefined;
}

export interface SimCard {
  readonly iccid: string;
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
  /** The account the card belongs to: the latest that called for it or registered it. */
  account: string | undefined;
  /** Per type, when (epoch ms) its state last changed, while no answer has carried it yet. */
  readonly unlearned: Partial<Record<ChangingType, number>>;
  /** Per type, when (epoch ms) its state last changed: answers carry it as `changedAt`. */
  readonly changedAt: Partial<Record<ChangingType, number>>;
  /** Per type, the serial of its latest change: a pushed event learns only the change it carried. */
  readonly changeSerial: Partial<Record<ChangingType, number>>;
}

export type Admission =
  | { readonly admitted: true; readonly group: string; readonly counters: GroupCounters }
  | { readonly admitted: false; readonly group: string; readonly retryAfterMs: number };

export class SimWorld {
  readonly accounts = new Map<string, SimAccount>();
  readonly cards = new Map<string, SimCard>();
  random: () => number;
  /**
   * Told of every change of a card that belongs to an account, synchronously, after the card took
   * its new state (the server pushes it). It must not draw from `random`: a seeded run stays the
   * same whether anyone listens or not.
   */
  onChange: ((change: CardChange) => void) | undefined = undefined;
  /** Serial of the latest change (any card): unique within the process, resets included. */
  private changeSerials = 0;

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
      account = {
        settings: structuredClone(DEFAULT_ACCOUNT),
        groups: new Map(),
        cards: [],
        freshness: {},
        driftCarry: {},
        driftAt: undefined,
        push: undefined,
      };
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
    if (update.changeRatePerHour) s.changeRatePerHour = { ...update.changeRatePerHour };
    return s;
  }

  /** The card belongs to `accountName` from now on (its calls, or a registration, say so). */
  attach(iccid: string, accountName: string): SimCard {
    const card = this.card(iccid);
    if (card.account !== accountName) {
      card.account = accountName;
      this.account(accountName).cards.push(iccid);
    }
    return card;
  }

  /**
   * Applies the drift owed since the last call (`now` = epoch ms; the server calls it every
   * second): per account and type, rate × cards × elapsed hours changes, each on a card drawn at
   * random among the account's. Fractions carry over, so a slow rate still changes cards.
   */
  drift(now: number): void {
    for (const [name, account] of this.accounts) {
      const elapsedMs = account.driftAt === undefined ? 0 : Math.max(0, now - account.driftAt);
      account.driftAt = now;
      for (const type of CHANGING_TYPES) {
        const rate = account.settings.changeRatePerHour[type] ?? 0;
        if (rate <= 0 || account.cards.length === 0) continue;
        let owed = (account.driftCarry[type] ?? 0) + (rate * account.cards.length * elapsedMs) / 3_600_000;
        for (; owed >= 1; owed -= 1) {
          const iccid = account.cards[Math.floor(this.random() * account.cards.length)] as string;
          const card = this.card(iccid);
          // A card that moved to another account since changes under that one's rate.
          if (card.account !== name) continue;
          if (type === 'card_status') {
            card.network = card.network === 'online' ? 'offline' : 'online';
            card.pendingNetwork = undefined;
          } else card.realname = card.realname === 'verified' ? 'unverified' : 'verified';
          this.changed(card, type, now);
        }
        account.driftCarry[type] = owed;
      }
    }
  }

  /**
   * The card's state of `type` changed at `at` (epoch ms), the card already holding its new state:
   * stamped until an answer (or a delivered push) carries it.
   */
  changed(card: SimCard, type: ChangingType, at: number): void {
    card.changedAt[type] = at;
    this.changeSerials += 1;
    card.changeSerial[type] = this.changeSerials;
    // A card no account called or registered yet: nobody can have learned its state.
    if (card.account === undefined) return;
    const counters = this.freshnessOf(card.account, type);
    counters.changes += 1;
    if (card.unlearned[type] !== undefined) counters.superseded += 1;
    card.unlearned[type] = at;
    this.onChange?.({ card, account: card.account, type, at, serial: this.changeSerials });
  }

  /** An answer about `type` left at `now` (epoch ms) carrying the card's current state. */
  answered(card: SimCard, type: GatewayCheckType, now: number): void {
    if (type !== 'card_status' && type !== 'realname') return;
    this.learn(card, type, now);
  }

  /**
   * A pushed event that carried change `serial` of the card's `type` was answered 2xx at `now`
   * (epoch ms): learned like an answer, unless a later change overtook it (the event then carried a
   * state the card no longer has) or an answer learned it first.
   */
  pushDelivered(iccid: string, type: ChangingType, serial: number, now: number): void {
    // Not `card()`: a delivery must neither create a card nor apply a due transition.
    const card = this.cards.get(iccid);
    if (card?.changeSerial[type] === serial) this.learn(card, type, now);
  }

  /** The card's unlearned change of `type`, if any, is learned at `now`. */
  private learn(card: SimCard, type: ChangingType, now: number): void {
    const at = card.unlearned[type];
    if (at === undefined) return;
    delete card.unlearned[type];
    if (card.account === undefined) return;
    const counters = this.freshnessOf(card.account, type);
    counters.learned += 1;
    if (counters.samplesMs.length < MAX_STALENESS_SAMPLES) counters.samplesMs.push(Math.max(0, now - at));
  }

  /** The account's push counters, created on first use (the account starts pushing). */
  pushCounters(accountName: string): PushCounters {
    const account = this.account(accountName);
    account.push ??= { sent: 0, delivered: 0, failed: 0, retried: 0, dropped: 0 };
    return account.push;
  }

  /**
   * What a check of `type` answers about the card at `at` (epoch ms), without side effects: both an
   * answer and a pushed event carry it.
   */
  observation(card: SimCard, type: GatewayCheckType, at: number): ObservationByType[GatewayCheckType] {
    switch (type) {
      case 'card_status':
        return { network: card.network, status: card.network === 'online' ? 'active' : 'suspended' };
      case 'carddata':
        return { usageKb: this.usageKb(card, at), periodStart: periodStart(new Date(at)) };
      case 'realname':
        return { realname: card.realname };
    }
  }

  private freshnessOf(accountName: string, type: ChangingType): FreshnessCounters {
    const account = this.account(accountName);
    let counters = account.freshness[type];
    if (!counters) {
      counters = { changes: 0, learned: 0, superseded: 0, samplesMs: [] };
      account.freshness[type] = counters;
    }
    return counters;
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
        iccid,
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
        account: undefined,
        unlearned: {},
        changedAt: {},
        changeSerial: {},
      };
      this.cards.set(iccid, card);
    }
    // Apply a due stop/resume transition lazily: no timers to clean up.
    if (card.pendingNetwork && card.pendingNetwork.at <= Date.now()) {
      const { state, at } = card.pendingNetwork;
      card.pendingNetwork = undefined;
      if (card.network !== state) {
        card.network = state;
        this.changed(card, 'card_status', at);
      }
    }
    return card;
  }

  updateCard(iccid: string, update: CardStateUpdate): SimCard {
    const card = this.card(iccid);
    const now = Date.now();
    if (update.network !== undefined) {
      if ((update.afterMs ?? 0) > 0) card.pendingNetwork = { state: update.network, at: now + (update.afterMs ?? 0) };
      else {
        const changed = card.network !== update.network;
        card.network = update.network;
        card.pendingNetwork = undefined;
        // After the new state is set: a listener reads the card as it is after the change.
        if (changed) this.changed(card, 'card_status', now);
      }
    }
    if (update.realname !== undefined && update.realname !== card.realname) {
      card.realname = update.realname;
      this.changed(card, 'realname', now);
    }
    if (update.usageKb !== undefined) {
      const changed = update.usageKb !== this.usageKb(card, now);
      card.usageBaseKb = update.usageKb;
      card.usageBaseAt = now;
      // Usage is no freshness state (it grows by itself), but a pushing account reports a set one.
      if (changed && card.account !== undefined) this.onChange?.({ card, account: card.account, type: 'carddata', at: now, serial: undefined });
    }
    return this.card(iccid);
  }

  /** The card's usage at `at` (epoch ms). */
  usageKb(card: SimCard, at: number = Date.now()): number {
    return Math.floor(card.usageBaseKb + (card.usageKbPerSec * (at - card.usageBaseAt)) / ONE_SECOND_MS);
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
      const freshness: NonNullable<SimStats['accounts'][string]['freshness']> = {};
      for (const type of CHANGING_TYPES) {
        const counters = account.freshness[type];
        if (counters) freshness[type] = freshnessStats(counters);
      }
      accounts[name] = {
        groups,
        ...(Object.keys(freshness).length > 0 ? { freshness } : {}),
        ...(account.push === undefined ? {} : { push: { ...account.push } }),
      };
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

/** What became of an account's changes of one type (staleness: change → first answer carrying it). */
export interface FreshnessStats {
  readonly changes: number;
  readonly learned: number;
  /** Overtaken by the card's next change before any answer carried them. */
  readonly superseded: number;
  /** Changed, not yet carried by an answer. */
  readonly pending: number;
  /** Over the learned changes (null before the first). */
  readonly stalenessMs: { readonly p50: number; readonly p99: number; readonly max: number } | null;
}

function freshnessStats(counters: FreshnessCounters): FreshnessStats {
  const sorted = [...counters.samplesMs].sort((a, b) => a - b);
  const rank = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
  return {
    changes: counters.changes,
    learned: counters.learned,
    superseded: counters.superseded,
    pending: counters.changes - counters.learned - counters.superseded,
    stalenessMs: sorted.length === 0 ? null : { p50: rank(0.5), p99: rank(0.99), max: sorted[sorted.length - 1] ?? 0 },
  };
}

export interface SimStats {
  accounts: Record<string, { groups: Record<string, GroupStats>; freshness?: Partial<Record<ChangingType, FreshnessStats>>; push?: Readonly<PushCounters> }>;
  /**
   * `calls`: every call of the card that arrived (rejected ones too); `answered`: those answered with
   * an observation; `inflight`: the card's calls not answered yet; `lastCallAt`: epoch ms of its
   * latest call (absent before its first).
   */
  cards?: Record<string, { calls: number; answered: number; maxConcurrent: number; inflight: number; lastCallAt?: number }>;
  /** Memory of the process serving the simulator (src/runtime/liveHeap.ts): added by the server. */
  process?: ProcessMemory;
}

/** First day of the billing period `now` falls in (UTC), as a carddata answer gives it. */
function periodStart(now: Date): string {
  return `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-01`;
}
