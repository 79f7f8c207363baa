/**
 * Typed store over the carrier queue Lua scripts (docs/design.md, 'Redis model' and 'Lua scripts').
 * Redis (through the scripts) is the authority on claims, leases, due times and lanes; this class
 * only builds calls, runs them by SHA and parses replies (all in `carrierScripts.ts`).
 *
 * Time: every method takes "now" (ms). When omitted it is `Date.now()`, or Redis' own clock when
 * the store is built with `{ clock: 'redis' }` (one clock for all processes, no skew).
 */
import type { ChainableCommander } from 'ioredis';
import { groupBySlot, type RedisConnection } from './connection.js';
import type { CheckType } from '../workflow-safe/checkTypes.js';
import { accountKeys, globalKeys, type AccountKeys } from './keys.js';
import type { EngineShareEntry } from '../workflow-safe/engineShare.js';
import { registerScripts, callScript, scriptParams } from './scriptLoader.js';
import { parseDueHash, type DueState } from './dueState.js';
import {
  CARRIER_SCRIPTS,
  acquireExecCall,
  claimCall,
  claimCandidatesCall,
  parseClaimCandidatesReply,
  finishCall,
  holdClaimsCall,
  markIdleCall,
  parseAcquireExecReply,
  parseMarkIdleReply,
  parseWakeIfIdleReply,
  wakeIfIdleCall,
  observedCall,
  parseObservedReply,
  type ObservedArgs,
  type ObservedResult,
  parseClaimReply,
  parseFinishReply,
  parseHoldClaimsReply,
  parseOwnedReply,
  parseRemoveReply,
  parseRequestCheckReply,
  parseUpsertReply,
  releaseCall,
  removeCall,
  renewCall,
  requestCheckCall,
  upsertCall,
  assertCardId,
  type AcquireExecResult,
  type ClaimResult,
  type FinishReply,
  type HeldClaim,
  type Lane,
  type MarkIdleArgs,
  type NowArg,
  type RequestCheckResult,
  type ScriptCall,
} from './carrierScripts.js';

export type { AcquireExecResult, ClaimResult, FinishReply, HeldClaim, Lane, RequestCheckResult } from './carrierScripts.js';
export type { DueState } from './dueState.js';

export type CarrierId = string | number;

export interface CarrierQueueStoreOptions {
  /** Where an omitted `now` comes from: this process (`local`, default) or Redis `TIME`. */
  readonly clock?: 'local' | 'redis';
  /**
   * How often this process reads the whole engine share table (default
   * {@link ENGINE_SHARE_READ_EVERY_MS}; 0 = at every round, as tests of the table itself do).
   */
  readonly engineShareReadEveryMs?: number;
}

/**
 * The engine share table is read at most this often per process, not at every account's round:
 * every round reading every account's entry made a second of claim rounds cost O(accounts²)
 * (issue 45). A rate a second old is as good for a share smoothed over many seconds.
 */
export const ENGINE_SHARE_READ_EVERY_MS = 1000;

export interface ClaimInput {
  readonly carrierId: CarrierId;
  readonly now?: number;
  readonly leaseMs: number;
  readonly inflightLimit: number;
  /** The priority lane's in-flight limit (>= inflightLimit, default it): priority cards may be claimed past inflightLimit. */
  readonly priorityInflightLimit?: number;
  /** Share of capacity for the first priority pass; 0 = unlimited. */
  readonly priorityRatio: number;
  /** Unique per claimer and round; tokens are `<tokenPrefix>@<claim ms>:<cardId>` (the claim script adds its instant). */
  readonly tokenPrefix: string;
  /** Remaining budget per rate-limit group; absent = unlimited (also per group). */
  readonly groupBudget?: Record<string, number>;
  readonly typeGroups: Record<string, string>;
  /** Whether realname calls count (the account has real-name control). */
  readonly countRealname: boolean;
  /** A retried round (same token prefix): returns the claims an earlier attempt made, if any. */
  readonly retry?: boolean;
  /** Claim cards due up to this many ms after now (see claim.lua ARGV[11]). */
  readonly dueHorizonMs?: number;
  /** Types the account polls under any card status; long-overdue dues of others are dropped (claim.lua ARGV[12]). */
  readonly polledTypes?: readonly CheckType[];
}

export interface FinishInput {
  readonly carrierId: CarrierId;
  readonly cardId: string;
  readonly token: string;
  readonly now?: number;
  readonly set: Record<string, string | number>;
  readonly del: string[];
  /** The caller's result: stored with the finish, and what a retry by the same token gets back. */
  readonly record?: string;
  /** The caller lost its lease mid-execution: write as a stale finish, release nothing. */
  readonly leaseLost?: boolean;
}

export interface RequestCheckInput {
  readonly carrierId: CarrierId;
  readonly cardId: string;
  readonly now?: number;
  readonly cooldownMs: number;
  readonly confirmDelaysSec?: number[];
  readonly expected?: string;
  readonly lane: Lane;
  readonly types: CheckType[];
}

export interface UpsertInput {
  readonly carrierId: CarrierId;
  readonly cardId: string;
  readonly now?: number;
  /** Due time (ms) per polled type; no type = remove the card. */
  readonly dues: Partial<Record<CheckType, number>>;
  /**
   * A conditional write for the types listed (lifecycle, outbox relay, rebuild: writers that read
   * the due times before they write): a due Redis holds for the type is kept, lowered to the cap
   * when later; `dues[type]` is written only when it holds none (lua/upsert.lua).
   */
  readonly caps?: Partial<Record<CheckType, number>>;
}

/** The earliest due time written per account (upserts without dues remove their card: none). */
function earliestDues(inputs: readonly UpsertInput[]): Map<string, number> {
  const earliest = new Map<string, number>();
  for (const input of inputs) {
    for (const due of Object.values(input.dues)) {
      if (due === undefined) continue;
      const id = String(input.carrierId);
      const known = earliest.get(id);
      if (known === undefined || due < known) earliest.set(id, due);
    }
  }
  return earliest;
}

export interface CardRef {
  readonly carrierId: CarrierId;
  readonly cardId: string;
}

export interface LaneDepths {
  /** Cards in the priority lane, claimed ones included. */
  readonly priority: number;
  /** Cards in the normal lane, claimed ones included. */
  readonly normal: number;
  /** Claims in flight (tokens in `running`); each one's card is also counted in its lane. */
  readonly running: number;
}

/** Execution starts of an account since the last read, their summed start lag and queue lag. */
export interface StartStats {
  readonly starts: number;
  readonly lagSumMs: number;
  /** Starts that reported a queue lag (runs of older code did not), and its sum. */
  readonly queueStarts: number;
  readonly queueLagSumMs: number;
}

const START_STATS_TTL_MS = 60_000;
/** Accounts whose key names a store keeps (far more than a deployment has). */
const ACCOUNT_KEY_CACHE = 10_000;
/** An engine share entry this old is dropped from the table; the table expires when nobody writes it. */
const ENGINE_SHARE_TTL_MS = 60_000;
/**
 * How long a run's stored results wait for its replay (CarrierQueueStore.finishWithRun): a replay
 * comes after the dead worker's workflow task times out (seconds), or when a card worker runs
 * again; 10 minutes of finishes is what the keys cost in memory.
 */
const FINISHED_RUN_TTL_MS = 600_000;

/** An entry of the engine share table, or undefined when it is not one (written by other code). */
function parseEngineShareEntry(carrierId: string, raw: string): EngineShareEntry | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { startsPerSec, weight, wanting, at } = value as Record<string, unknown>;
  if (typeof startsPerSec !== 'number' || typeof weight !== 'number' || typeof wanting !== 'boolean' || typeof at !== 'number') return undefined;
  return { carrierId, startsPerSec, weight, wanting, at };
}

/** The `loop` key's value when no claim loop may claim for the account (ownClaimLoop). */
export const STOPPED_LOOP = 'stopped';

export class CarrierQueueStore {
  private readonly clock: 'local' | 'redis';
  private readonly accountKeyCache = new Map<string, AccountKeys>();
  private readonly engineShareReadEveryMs: number;
  /** The engine share table as this process last read it, and its own writes since. */
  private engineShares: { readAt: number; entries: Map<string, EngineShareEntry> } | undefined;

  constructor(
    private readonly redis: RedisConnection,
    private readonly namespace = '',
    options: CarrierQueueStoreOptions = {},
  ) {
    this.clock = options.clock ?? 'local';
    this.engineShareReadEveryMs = options.engineShareReadEveryMs ?? ENGINE_SHARE_READ_EVERY_MS;
    // Once per connection (registerScripts is idempotent); ioredis then calls by EVALSHA.
    registerScripts(redis, Object.values(CARRIER_SCRIPTS));
  }

  keys(carrierId: CarrierId): AccountKeys {
    // Built once per account: every script call needs them (a hot path: several calls per card run).
    const id = String(carrierId);
    let keys = this.accountKeyCache.get(id);
    if (keys === undefined) {
      if (this.accountKeyCache.size >= ACCOUNT_KEY_CACHE) this.accountKeyCache.clear();
      keys = accountKeys(this.namespace, id);
      this.accountKeyCache.set(id, keys);
    }
    return keys;
  }

  /**
   * The store's clock as a number, for computations outside the scripts (which due types an
   * execution runs, when they are due next): Redis TIME when the store runs on Redis' clock, so a
   * finish computed here and a request stamped by a script on another host compare on one clock.
   */
  async clockNow(): Promise<number> {
    if (this.clock === 'local') return Date.now();
    // On a cluster TIME reaches any node; their clocks agree (one host, or NTP: see connection.ts).
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  private now(now: number | undefined): NowArg {
    if (now !== undefined) return now;
    return this.clock === 'redis' ? '' : Date.now();
  }

  private run(call: ScriptCall): Promise<unknown> {
    return callScript(this.redis, call.name, call.keys, call.args);
  }

  /**
   * One claim round: the cards it may touch are read first (claimCandidates.lua), so the claim
   * declares each of their keys (Redis Cluster); cards due after that read wait for the next round.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    const keys = this.keys(input.carrierId);
    const now = this.now(input.now);
    const cards = parseClaimCandidatesReply(await this.run(claimCandidatesCall(keys, { ...input, now })));
    return parseClaimReply(await this.run(claimCall(keys, { ...input, now, cards })));
  }

  async acquireExec(carrierId: CarrierId, cardId: string, token: string, executorId: string, ttlMs: number, now?: number): Promise<AcquireExecResult> {
    const call = acquireExecCall(this.keys(carrierId), cardId, token, executorId, ttlMs, this.now(now));
    return parseAcquireExecReply(await this.run(call));
  }

  /** False: the lease or exec right is gone; stop before the next gateway call. */
  async renew(carrierId: CarrierId, cardId: string, token: string, executorId: string, leaseMs: number, now?: number): Promise<boolean> {
    const call = renewCall(this.keys(carrierId), cardId, token, executorId, leaseMs, this.now(now));
    return parseOwnedReply('renew', await this.run(call));
  }

  /**
   * Extends the leases of claims no run has taken up yet (lua/holdClaims.lua): the scheduler's
   * children whose start the server has not made. Returns how many were held.
   */
  async holdClaims(carrierId: CarrierId, claims: readonly HeldClaim[], leaseMs: number, now?: number): Promise<number> {
    if (claims.length === 0) return 0;
    return parseHoldClaimsReply(await this.run(holdClaimsCall(this.keys(carrierId), claims, leaseMs, this.now(now))));
  }

  /** True when the token still owned the claim (released and rescored); a replay answers as the first call did. */
  async finish(input: FinishInput): Promise<boolean> {
    return (await this.finishWithRecord(input)).owned;
  }

  /**
   * finish, telling a replay apart: when a finish by this token with a record already landed,
   * nothing is applied and `replayed` is that record (one round trip either way).
   */
  async finishWithRecord(input: FinishInput): Promise<FinishReply> {
    const call = finishCall(this.keys(input.carrierId), { ...input, now: this.now(input.now) });
    return parseFinishReply(await this.run(call));
  }

  /**
   * finish, with what the run's record needs written first under the token's own key (SET NX: a
   * retried finish keeps the first attempt's), in one round trip: a finish that reached Redis
   * always has it (docs/design.md, 'cardCheck', the replay after a finish).
   */
  async finishWithRun(input: FinishInput, run: string): Promise<FinishReply> {
    const keys = this.keys(input.carrierId);
    const call = finishCall(keys, { ...input, now: this.now(input.now) });
    const pipeline = this.redis.pipeline();
    pipeline.set(keys.finishedRun(input.cardId, input.token), run, 'PX', FINISHED_RUN_TTL_MS, 'NX');
    const command = (pipeline as unknown as Record<string, unknown>)[call.name];
    if (typeof command !== 'function') throw new Error(`Lua script ${call.name} is not registered on this connection`);
    (command as (...params: (string | number)[]) => ChainableCommander).call(pipeline, ...scriptParams(call.name, call.keys, call.args));
    const replies = (await pipeline.exec()) ?? [];
    const [, finish] = replies;
    if (!finish) throw new Error('finish: no pipeline reply');
    if (finish[0]) throw finish[0];
    return parseFinishReply(finish[1]);
  }

  /**
   * What a run holding `token` stored before its finish (finishWithRun), and the finish's reply when
   * the card's last recorded finish is still that token's (`fin`, lua/finish.lua): null when the
   * run never got that far or its key expired.
   */
  async finishedRun(carrierId: CarrierId, cardId: string, token: string): Promise<{ readonly run: string; readonly owned: boolean | null } | null> {
    assertCardId('finishedRun', cardId);
    const keys = this.keys(carrierId);
    const [run, fin] = await Promise.all([this.redis.get(keys.finishedRun(cardId, token)), this.redis.get(keys.finished(cardId))]);
    if (run === null) return null;
    // `fin` is `<token>|<reply>|<record>`, the reply 1 (owned) or 0; a newer token's says nothing of this one.
    const mine = `${token}|`;
    return { run, owned: fin !== null && fin.startsWith(mine) ? fin.slice(mine.length, mine.length + 1) === '1' : null };
  }

  /** Gives a claim back; with `retryAfterMs` the card becomes claimable again only after that long. */
  async release(carrierId: CarrierId, cardId: string, token: string, now?: number, retryAfterMs = 0): Promise<boolean> {
    const call = releaseCall(this.keys(carrierId), cardId, token, this.now(now), retryAfterMs);
    return parseOwnedReply('release', await this.run(call));
  }

  async requestCheck(input: RequestCheckInput): Promise<RequestCheckResult> {
    const call = requestCheckCall(this.keys(input.carrierId), { ...input, now: this.now(input.now) });
    return parseRequestCheckReply(await this.run(call));
  }

  /** Returns the account when its scheduler sleeps past the card's earliest due (wake it: lua/wakeIfIdle.lua). */
  async upsert(input: UpsertInput): Promise<string[]> {
    parseUpsertReply(await this.run(this.upsertScriptCall(input)));
    return this.wakeIfIdle(earliestDues([input]));
  }

  /** Pushed events' effects on their cards' schedules, in one pipeline (lua/observed.lua). */
  async observedMany(inputs: readonly (Omit<ObservedArgs, 'now'> & { readonly carrierId: CarrierId })[]): Promise<ObservedResult[]> {
    const replies = await this.pipelined(inputs.map((input) => observedCall(this.keys(input.carrierId), { ...input, now: this.now(undefined) })));
    return replies.map(parseObservedReply);
  }

  /** True when the card was in a lane. */
  async remove(carrierId: CarrierId, cardId: string): Promise<boolean> {
    return parseRemoveReply(await this.run(removeCall(this.keys(carrierId), cardId)));
  }

  /**
   * Many upserts in one pipeline (lifecycle batch operations). Returns the accounts whose scheduler
   * sleeps past a due time written here: the caller wakes them (lua/wakeIfIdle.lua).
   */
  async upsertMany(inputs: readonly UpsertInput[]): Promise<string[]> {
    const replies = await this.pipelined(inputs.map((input) => this.upsertScriptCall(input)));
    for (const reply of replies) parseUpsertReply(reply);
    return this.wakeIfIdle(earliestDues(inputs));
  }

  /** Many removes in one pipeline; returns how many cards were in a lane. */
  async removeMany(cards: readonly CardRef[]): Promise<number> {
    const replies = await this.pipelined(cards.map((card) => removeCall(this.keys(card.carrierId), card.cardId)));
    return replies.filter((reply) => parseRemoveReply(reply)).length;
  }

  /**
   * Moves a card to another account: removed from the old one first, then upserted under the new
   * one (two slots, so two steps: briefly in neither, never in both — docs/design.md, 'Lifecycle').
   */
  async moveCarrier(input: UpsertInput & { readonly fromCarrierId: CarrierId }): Promise<string[]> {
    await this.remove(input.fromCarrierId, input.cardId);
    return this.upsert(input);
  }

  async readDue(carrierId: CarrierId, cardId: string): Promise<DueState | null> {
    assertCardId('readDue', cardId);
    return parseDueHash(await this.redis.hgetall(this.keys(carrierId).due(cardId)));
  }

  async laneOf(carrierId: CarrierId, cardId: string): Promise<Lane | null> {
    const keys = this.keys(carrierId);
    const [prio, queue] = await Promise.all([this.redis.zscore(keys.prio, cardId), this.redis.zscore(keys.queue, cardId)]);
    if (prio !== null) return 'priority';
    return queue !== null ? 'normal' : null;
  }

  /**
   * Lane sizes and claims in flight at one instant (one MULTI: one slot). The lanes hold every
   * polled card, claimed ones included (scored at their lease end), so lanes + running counts a
   * card in flight twice: polled cards = priority + normal.
   */
  async depths(carrierId: CarrierId): Promise<LaneDepths> {
    const keys = this.keys(carrierId);
    const replies = (await this.redis.multi().zcard(keys.prio).zcard(keys.queue).zcard(keys.running).exec()) ?? [];
    const [priority, normal, running] = replies.map(([error, count]) => {
      if (error) throw error;
      return Number(count);
    });
    return { priority: priority ?? 0, normal: normal ?? 0, running: running ?? 0 };
  }

  /**
   * After a round that claimed nothing: how long the account's scheduler may sleep (0 = keep
   * ticking), marked in Redis so that a writer of an earlier due wakes it (lua/markIdle.lua).
   */
  async markIdle(carrierId: CarrierId, args: Omit<MarkIdleArgs, 'now'> & { readonly now?: number }): Promise<number> {
    return parseMarkIdleReply(await this.run(markIdleCall(this.keys(carrierId), { ...args, now: this.now(args.now) })));
  }

  /**
   * Makes `generation` the claim loop that owns the account's claiming (SCHEDULER_LOOP=activity):
   * a loop from before (a worker frozen past its heartbeat timeout) finds itself superseded at its
   * next round and ends. `stopped` leaves no loop owning it (pause, config change, continue-as-new).
   */
  async ownClaimLoop(carrierId: CarrierId, generation: string): Promise<void> {
    const keys = this.keys(carrierId);
    // A stopped loop's view goes with it: the status then reads the workflow's (paused, say).
    if (generation === STOPPED_LOOP) await this.redis.multi().set(keys.loop, generation).del(keys.loopView).exec();
    else await this.redis.set(keys.loop, generation);
  }

  /**
   * One claim loop's look before its round: whether it still owns the account, and whether the
   * account sleeps (lua/markIdle.lua marked it, nothing in the priority lane is due within
   * `horizonMs`): a sleeping account's loop skips the round. `marked`: the idle mark stands (with
   * `sleeping` false: the priority lane woke the account before the mark's end).
   */
  async claimLoopState(
    carrierId: CarrierId,
    generation: string,
    horizonMs: number,
    now = Date.now(),
  ): Promise<{ owned: boolean; sleeping: boolean; marked: boolean }> {
    const keys = this.keys(carrierId);
    const replies = (await this.redis.multi().get(keys.loop).get(keys.idle).zrange(keys.prio, 0, 0, 'WITHSCORES').exec()) ?? [];
    const values = replies.map(([error, value]) => {
      if (error) throw error;
      return value;
    });
    const [owner, idleUntil, firstPriority] = values;
    const priorityDue = Array.isArray(firstPriority) && firstPriority.length >= 2 ? Number(firstPriority[1]) : Number.POSITIVE_INFINITY;
    const marked = typeof idleUntil === 'string' && Number(idleUntil) > now;
    return { owned: owner === generation, sleeping: marked && priorityDue > now + horizonMs, marked };
  }

  /** Deletes the account's idle mark (lua/markIdle.lua): its loop claims every tick again until a round marks it anew. */
  async clearIdle(carrierId: CarrierId): Promise<void> {
    await this.redis.del(this.keys(carrierId).idle);
  }

  /** Publishes a claim loop's status view for `ttlMs` (the account's status reads it: src/api/queries/carrierStatus.ts). */
  async publishLoopView(carrierId: CarrierId, view: unknown, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys(carrierId).loopView, JSON.stringify(view), 'PX', Math.max(1, Math.round(ttlMs)));
  }

  /** The claim loop's last published view (JSON), or null when none is fresh. */
  async loopView(carrierId: CarrierId): Promise<string | null> {
    return this.redis.get(this.keys(carrierId).loopView);
  }

  /** The accounts, of those given with the earliest due just written in each, whose scheduler sleeps past it (the mark is cleared: wake them). */
  async wakeIfIdle(earliest: ReadonlyMap<string, number>): Promise<string[]> {
    const ids = [...earliest.keys()];
    if (ids.length === 0) return [];
    const replies = await this.pipelined(ids.map((id) => wakeIfIdleCall(this.keys(id), earliest.get(id) ?? 0)));
    return ids.filter((_, i) => parseWakeIfIdleReply(replies[i]));
  }

  /** Cards due at or before `now` in both lanes (claimed cards are scored past now). */
  async dueNowCount(carrierId: CarrierId, now?: number): Promise<number> {
    const keys = this.keys(carrierId);
    const at = now ?? (await this.clockNow());
    const [priority, normal] = await Promise.all([this.redis.zcount(keys.prio, '-inf', at), this.redis.zcount(keys.queue, '-inf', at)]);
    return priority + normal;
  }

  /**
   * Counts one execution start, its start lag (claim to first workflow task) and its queue lag
   * (run creation to first workflow task) for the account's next claim round. Statistics, not
   * authority: a plain MULTI, and the hash expires when no scheduler reads it.
   */
  async recordStart(carrierId: CarrierId, lagMs: number, queueLagMs?: number): Promise<void> {
    const key = this.keys(carrierId).engine;
    const multi = this.redis
      .multi()
      .hincrby(key, 'starts', 1)
      .hincrby(key, 'lagSumMs', Math.max(0, Math.round(lagMs)));
    if (queueLagMs !== undefined) multi.hincrby(key, 'queueStarts', 1).hincrby(key, 'queueLagSumMs', Math.max(0, Math.round(queueLagMs)));
    await multi.pexpire(key, START_STATS_TTL_MS).exec();
  }

  /**
   * Writes the account's entry in the engine share table and reads every account's
   * (src/workflow-safe/engineShare.ts). Statistics, not authority: a plain MULTI on one key;
   * entries older than a minute are dropped, and the table expires when no claim round writes it.
   */
  async shareEngine(entry: EngineShareEntry): Promise<EngineShareEntry[]> {
    const key = globalKeys(this.namespace).engineShares;
    const { carrierId, ...fields } = entry;
    await this.redis.multi().hset(key, carrierId, JSON.stringify(fields)).pexpire(key, ENGINE_SHARE_TTL_MS).exec();
    const cached = this.engineShares;
    const fresh = cached !== undefined && entry.at - cached.readAt < this.engineShareReadEveryMs;
    const table = fresh ? cached.entries : await this.readEngineShares(entry.at);
    // This process's own writes since the read (this account's among them) replace what was read.
    table.set(carrierId, entry);
    return [...table.values()];
  }

  /** The whole table, its entries older than a minute (or not entries) deleted; kept for the next rounds of this process. */
  private async readEngineShares(at: number): Promise<Map<string, EngineShareEntry>> {
    const key = globalKeys(this.namespace).engineShares;
    const hash = await this.redis.hgetall(key);
    const entries = new Map<string, EngineShareEntry>();
    const stale: string[] = [];
    for (const [id, raw] of Object.entries(hash)) {
      const parsed = parseEngineShareEntry(id, raw);
      if (parsed === undefined || at - parsed.at > ENGINE_SHARE_TTL_MS) stale.push(id);
      else entries.set(id, parsed);
    }
    if (stale.length > 0) await this.redis.hdel(key, ...stale);
    this.engineShares = { readAt: at, entries };
    return entries;
  }

  /** The starts recorded since the previous call, read and reset in one step (one reader: the account's scheduler). */
  async takeStartStats(carrierId: CarrierId): Promise<StartStats> {
    const key = this.keys(carrierId).engine;
    const replies = (await this.redis.multi().hgetall(key).del(key).exec()) ?? [];
    const [error, hash] = replies[0] ?? [null, {}];
    if (error) throw error;
    const fields = (hash ?? {}) as Record<string, string>;
    return {
      starts: Number(fields.starts ?? 0),
      lagSumMs: Number(fields.lagSumMs ?? 0),
      queueStarts: Number(fields.queueStarts ?? 0),
      queueLagSumMs: Number(fields.queueLagSumMs ?? 0),
    };
  }

  private upsertScriptCall(input: UpsertInput): ScriptCall {
    return upsertCall(this.keys(input.carrierId), {
      carrierId: String(input.carrierId),
      cardId: input.cardId,
      now: this.now(input.now),
      dues: input.dues,
      ...(input.caps ? { caps: input.caps } : {}),
    });
  }

  /**
   * Script calls in pipelines, replies in call order (the first failed call's error is thrown).
   * One pipeline per slot, i.e. per account (on a cluster a pipeline goes to one node, and a batch
   * may span accounts); they run concurrently, so it is still about one round trip.
   */
  private async pipelined(calls: readonly ScriptCall[]): Promise<unknown[]> {
    if (calls.length === 0) return [];
    const results: [Error | null, unknown][] = new Array<[Error | null, unknown]>(calls.length);
    const batches = groupBySlot(
      calls.map((call, index) => ({ call, index })),
      (entry) => entry.call.keys[0] ?? '',
    );
    await Promise.all(
      batches.map(async (batch) => {
        const pipeline = this.redis.pipeline();
        for (const { call } of batch) {
          const command = (pipeline as unknown as Record<string, unknown>)[call.name];
          if (typeof command !== 'function') throw new Error(`Lua script ${call.name} is not registered on this connection`);
          (command as (...params: (string | number)[]) => ChainableCommander).call(pipeline, ...scriptParams(call.name, call.keys, call.args));
        }
        const replies = (await pipeline.exec()) ?? [];
        batch.forEach(({ index }, at) => (results[index] = replies[at] ?? [new Error('missing pipeline reply'), null]));
      }),
    );
    return results.map(([error, reply]) => {
      if (error) throw error;
      return reply;
    });
  }
}
