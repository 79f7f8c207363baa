/**
 * In-memory model of the carrier queue, written from docs/design.md ('Lua scripts') and the script
 * headers, used by the randomized test to predict Redis state step by step. Deliberately plain:
 * maps and loops, no cleverness, so a disagreement points at the scripts.
 */
import { GATEWAY_CHECK_TYPES } from '../../../src/workflow-safe/checkTypes.js';
import type { ClaimArgs } from '../../../src/redis/carrierScripts.js';

export type Hash = Map<string, string>;

/** Score of a card with no due type (finish, and a claim that dropped its only due strays). */
const NO_DUE_RETRY_MS = 3_600_000;
/** How long past due a due of a type the account polls no more must be before a claim drops it (claim.lua). */
export const STRAY_AGE_MS = 60_000;

export class ModelAccount {
  readonly prio = new Map<string, number>();
  readonly queue = new Map<string, number>();
  readonly running = new Map<string, number>();
  readonly claim = new Map<string, string>();
  readonly exec = new Map<string, string>();
  readonly due = new Map<string, Hash>();
  /** A card's last finish with a record (`<card>fin`): `<token>|<reply>|<record>`. */
  readonly fin = new Map<string, string>();
}

/** The script's own arguments, with a numeric now. */
export type ModelClaimInput = Omit<ClaimArgs, 'now'> & { readonly now: number };

export interface ModelClaimResult {
  expired: number;
  claimed: { cardId: string; token: string; fromPriority: boolean }[];
  /** Calls per group of each claimed card, as planned (for I6): the admitted groups only. */
  needs: Map<string, number>[];
  /** Gateway types each claimed card was claimed without (closed groups), as written to `dfr`. */
  deferred: string[][];
  capacity: number;
  /** The priority lane's capacity (its own in-flight limit, at least the normal capacity). */
  priorityCapacity: number;
  stopped: boolean;
  /** Candidates left due because every type they needed waited for a closed group. */
  skipped: number;
  /** A retried round got its first attempt's claims back (in no particular order: ZSCAN). */
  handedBack: boolean;
  /** Stray dues the round dropped (with their requests): types the account polls no more. */
  dropped: { cardId: string; type: string }[];
}

/** Cards a round may skip beyond its capacity (claim.lua SKIP_EXTRA). */
export const CLAIM_SKIP_EXTRA = 100;

/** Sorted like ZRANGEBYSCORE: score, then member (card ids are ASCII). */
function dueMembers(lane: Map<string, number>, now: number, offset: number, limit: number): string[] {
  return [...lane.entries()]
    .filter(([, score]) => score <= now)
    .sort(([a, sa], [b, sb]) => sa - sb || (a < b ? -1 : a > b ? 1 : 0))
    .slice(offset, offset + limit)
    .map(([member]) => member);
}

function num(raw: string | undefined): number | null {
  if (raw === undefined) return null;
  const value = Number(raw);
  return Number.isFinite(value) ? value : null;
}

function earliestDue(hash: Hash): number | null {
  let earliest: number | null = null;
  for (const [field, value] of hash) {
    if (!field.startsWith('due:')) continue;
    const v = num(value);
    if (v !== null && (earliest === null || v < earliest)) earliest = v;
  }
  return earliest;
}

export class CarrierModel {
  readonly accounts = new Map<string, ModelAccount>();

  account(id: string): ModelAccount {
    let account = this.accounts.get(id);
    if (!account) {
      account = new ModelAccount();
      this.accounts.set(id, account);
    }
    return account;
  }

  private liveExpiry(a: ModelAccount, cardId: string, token: string, now: number): number | null {
    if (a.claim.get(cardId) !== token) return null;
    const expiry = a.running.get(token);
    return expiry !== undefined && expiry > now ? expiry : null;
  }

  private clearClaim(a: ModelAccount, cardId: string, token: string): void {
    if (a.claim.get(cardId) === token) a.claim.delete(cardId);
    if (a.exec.get(cardId)?.startsWith(`${token}|`)) a.exec.delete(cardId);
    a.running.delete(token);
  }

  private laneOf(a: ModelAccount, cardId: string): Map<string, number> | null {
    if (a.prio.has(cardId)) return a.prio;
    return a.queue.has(cardId) ? a.queue : null;
  }

  claim(accountId: string, input: ModelClaimInput): ModelClaimResult {
    const a = this.account(accountId);
    const { now } = input;
    // Due means due by the time a run claimed now starts; leases are still judged against now.
    const dueBy = now + (input.dueHorizonMs ?? 0);
    let expired = 0;
    for (const [token, expiry] of [...a.running]) {
      if (expiry > now) continue;
      expired += 1;
      const cardId = /:([^:]+)$/.exec(token)?.[1];
      if (cardId !== undefined) this.clearClaim(a, cardId, token);
      a.running.delete(token);
    }
    const result: ModelClaimResult = {
      expired,
      claimed: [],
      needs: [],
      deferred: [],
      capacity: 0,
      priorityCapacity: 0,
      stopped: false,
      skipped: 0,
      handedBack: false,
      dropped: [],
    };
    // A retried round whose first attempt landed: its live claims back, nothing claimed.
    if (input.retry === true) {
      const mine = [...a.running.keys()].filter((token) => token.startsWith(`${input.tokenPrefix}@`));
      if (mine.length > 0) {
        for (const token of mine) {
          const cardId = /:([^:]+)$/.exec(token)?.[1] ?? '';
          // A card being run stays in the lane it was taken from: the claim reports that lane.
          result.claimed.push({ cardId, token, fromPriority: a.prio.has(cardId) });
          result.needs.push(new Map());
          result.deferred.push([]);
        }
        result.handedBack = true;
        return result;
      }
    }
    const capacity = Math.max(0, input.inflightLimit - a.running.size);
    const priorityCapacity = Math.max(capacity, (input.priorityInflightLimit ?? input.inflightLimit) - a.running.size);
    result.capacity = capacity;
    result.priorityCapacity = priorityCapacity;
    if (priorityCapacity <= 0) return result;
    const budgeted = input.groupBudget !== undefined;
    const budget = input.groupBudget ?? {};
    // Per gateway type, the budgeted group it counts against (realname only when it counts).
    const groupOf = (type: string): string | undefined => {
      if (type === 'realname' && !input.countRealname) return undefined;
      const group = input.typeGroups[type];
      return group !== undefined && budget[group] !== undefined ? group : undefined;
    };
    const closed = new Set<string>();
    let open = 0;
    const anyBudgetedType = budgeted && GATEWAY_CHECK_TYPES.some((type) => groupOf(type) !== undefined);
    for (const group of new Set(GATEWAY_CHECK_TYPES.map(groupOf))) {
      if (group === undefined) continue;
      if (budget[group]! <= 0) closed.add(group);
      else open += 1;
    }
    const used = new Map<string, number>();
    let taken = 0;
    let skipped = 0;
    let stop = false;
    const skipLimit = priorityCapacity + CLAIM_SKIP_EXTRA;
    // Known polled types (absent: not known, nothing is dropped).
    const polled = input.polledTypes === undefined ? null : new Set<string>(input.polledTypes);

    /**
     * A budgeted round drops the due (and request) of a gateway type the account does not poll once
     * it is STRAY_AGE_MS overdue, before anything else about the card. True when only strays made the
     * card due and nothing else is due by the horizon: it is rescored (or pushed, when claimed) instead.
     */
    const dropStrays = (cardId: string): boolean => {
      const hash = a.due.get(cardId);
      if (!anyBudgetedType || polled === null || !hash) return false;
      let dropped = false;
      let stillDue = false;
      for (const type of GATEWAY_CHECK_TYPES) {
        const due = num(hash.get(`due:${type}`));
        if (due === null) continue;
        if (!polled.has(type) && due <= now - STRAY_AGE_MS) {
          hash.delete(`due:${type}`);
          hash.delete(`req:${type}`);
          result.dropped.push({ cardId, type });
          dropped = true;
        } else if (due <= dueBy) stillDue = true;
      }
      if (!dropped || stillDue) return false;
      const earliest = earliestDue(hash);
      return earliest === null || earliest > dueBy;
    };

    const tryClaim = (cardId: string, fromPriority: boolean, lane: Map<string, number>): 'claimed' | 'handled' | 'skipped' => {
      const onlyStrays = dropStrays(cardId);
      const current = a.claim.get(cardId);
      if (onlyStrays) {
        if (current !== undefined) {
          const expiry = a.running.get(current);
          if (expiry !== undefined && expiry > now) {
            lane.set(cardId, Math.max(expiry, dueBy + 1));
            return 'handled';
          }
          this.clearClaim(a, cardId, current);
        }
        // Due again at its earliest remaining due (none: retried after NO_DUE_RETRY_MS).
        const rest = a.due.get(cardId);
        lane.set(cardId, (rest ? earliestDue(rest) : null) ?? now + NO_DUE_RETRY_MS);
        return 'handled';
      }
      if (current !== undefined) {
        const expiry = a.running.get(current);
        if (expiry !== undefined && expiry > now) {
          // Past the due range, so the round does not meet it again.
          lane.set(cardId, Math.max(expiry, dueBy + 1));
          return 'handled';
        }
        this.clearClaim(a, cardId, current);
      }
      const hash = a.due.get(cardId);
      const admitted = new Map<string, number>();
      const deferred: string[] = [];
      if (anyBudgetedType) {
        const need = new Map<string, number>();
        let unbudgeted = false;
        const dueNow = GATEWAY_CHECK_TYPES.filter((type) => {
          const due = num(hash?.get(`due:${type}`));
          return due !== null && due <= dueBy;
        });
        for (const type of dueNow) {
          const group = groupOf(type);
          if (group === undefined) unbudgeted = true;
          else need.set(group, (need.get(group) ?? 0) + 1);
        }
        for (const [group, n] of need) {
          if (closed.has(group)) continue;
          const u = used.get(group) ?? 0;
          if (u > 0 && u + n > budget[group]!) {
            closed.add(group);
            open -= 1;
          } else {
            admitted.set(group, n);
          }
        }
        if (need.size > 0 && admitted.size === 0 && !unbudgeted) {
          if (open <= 0) stop = true;
          return 'skipped';
        }
        for (const type of dueNow) {
          const group = groupOf(type);
          if (group !== undefined && !admitted.has(group)) deferred.push(type);
        }
        if (deferred.length > 0 && open <= 0) stop = true;
      }
      const token = `${input.tokenPrefix}@${now}:${cardId}`;
      a.claim.set(cardId, token);
      for (const [group, n] of admitted) used.set(group, (used.get(group) ?? 0) + n);
      lane.set(cardId, now + input.leaseMs);
      a.running.set(token, now + input.leaseMs);
      if (hash) {
        if (fromPriority && deferred.length === 0) hash.delete('prio');
        // The claim's instant travels in the token; `dfr` only when something is deferred.
        if (deferred.length > 0) hash.set('dfr', deferred.join(','));
        else hash.delete('dfr');
      }
      taken += 1;
      result.claimed.push({ cardId, token, fromPriority });
      result.needs.push(admitted);
      result.deferred.push(deferred);
      return 'claimed';
    };

    const skippedIn = new Map<Map<string, number>, number>();
    const drain = (lane: Map<string, number>, fromPriority: boolean, startQuota: number, cap: number): void => {
      let quota = startQuota;
      let offset = skippedIn.get(lane) ?? 0;
      while (quota > 0 && !stop && taken < cap) {
        const ids = dueMembers(lane, dueBy, offset, quota);
        if (ids.length === 0) break;
        for (const id of ids) {
          if (stop || quota <= 0 || taken >= cap) break;
          const outcome = tryClaim(id, fromPriority, lane);
          if (outcome === 'claimed') quota -= 1;
          else if (outcome === 'skipped') {
            offset += 1;
            skipped += 1;
            if (skipped >= skipLimit) stop = true;
          }
        }
      }
      skippedIn.set(lane, offset);
    };

    let priorityQuota = capacity;
    if (input.priorityRatio > 0 && capacity > 0) {
      priorityQuota = Math.min(capacity, Math.max(1, Math.floor(capacity * input.priorityRatio)));
    }
    drain(a.prio, true, priorityQuota, capacity);
    drain(a.queue, false, capacity - taken, capacity);
    drain(a.prio, true, priorityCapacity - taken, priorityCapacity);
    result.stopped = stop;
    result.skipped = skipped;
    return result;
  }

  acquireExec(accountId: string, cardId: string, token: string, value: string, now: number): 'acquired' | 'lost' | 'busy' {
    const a = this.account(accountId);
    if (this.liveExpiry(a, cardId, token, now) === null) return 'lost';
    const record = `${token}|${value}`;
    const current = a.exec.get(cardId);
    if (current !== undefined && current !== record && current.startsWith(`${token}|`)) return 'busy';
    a.exec.set(cardId, record);
    return 'acquired';
  }

  renew(accountId: string, cardId: string, token: string, value: string, leaseMs: number, now: number): boolean {
    const a = this.account(accountId);
    if (this.liveExpiry(a, cardId, token, now) === null) return false;
    if (a.exec.get(cardId) !== `${token}|${value}`) return false;
    a.running.set(token, now + leaseMs);
    if (a.prio.has(cardId)) a.prio.set(cardId, now + leaseMs);
    if (a.queue.has(cardId)) a.queue.set(cardId, now + leaseMs);
    return true;
  }

  /** holdClaims: each claim still live and not taken up by its token's run gets max(expiry, now + lease). */
  holdClaims(accountId: string, claims: readonly { cardId: string; token: string }[], leaseMs: number, now: number): number {
    const a = this.account(accountId);
    let held = 0;
    for (const { cardId, token } of claims) {
      const expiry = this.liveExpiry(a, cardId, token, now);
      if (expiry === null || a.exec.get(cardId)?.startsWith(`${token}|`)) continue;
      const until = Math.max(expiry, now + leaseMs);
      a.running.set(token, until);
      if (a.prio.has(cardId)) a.prio.set(cardId, until);
      if (a.queue.has(cardId)) a.queue.set(cardId, until);
      held += 1;
    }
    return held;
  }

  release(accountId: string, cardId: string, token: string, now: number): boolean {
    const a = this.account(accountId);
    if (this.liveExpiry(a, cardId, token, now) === null) return false;
    this.clearClaim(a, cardId, token);
    a.due.get(cardId)?.delete('dfr');
    a.due.get(cardId)?.delete('ups');
    if (a.prio.has(cardId)) a.prio.set(cardId, now);
    if (a.queue.has(cardId)) a.queue.set(cardId, now);
    return true;
  }

  /**
   * finish as production calls it: with the caller's result record (kept per card; a later finish by
   * the same token with a record replays the first reply and record, applying nothing) and, after a
   * failed renew, `leaseLost` (a stale finish even while the claim still names the token).
   */
  finishWithRecord(
    accountId: string,
    cardId: string,
    token: string,
    now: number,
    set: readonly [string, string][],
    del: readonly string[],
    options: { readonly record?: string; readonly leaseLost?: boolean },
  ): { owned: boolean; replayed: string | null } {
    const a = this.account(accountId);
    const record = options.record ?? '';
    const previous = record === '' ? undefined : a.fin.get(cardId);
    if (previous?.startsWith(`${token}|`)) return { owned: previous.charAt(token.length + 1) === '1', replayed: previous.slice(token.length + 3) };
    const owned = this.finish(accountId, cardId, token, now, set, del, options.leaseLost === true);
    if (record !== '') a.fin.set(cardId, `${token}|${owned ? 1 : 0}|${record}`);
    return { owned, replayed: null };
  }

  finish(accountId: string, cardId: string, token: string, now: number, set: readonly [string, string][], del: readonly string[], leaseLost = false): boolean {
    const a = this.account(accountId);
    const owned = !leaseLost && this.liveExpiry(a, cardId, token, now) !== null;
    const inLane = this.laneOf(a, cardId) !== null;
    const hash = a.due.get(cardId);
    if (!inLane || !hash) {
      if (!hash) {
        a.prio.delete(cardId);
        a.queue.delete(cardId);
      }
      if (owned) {
        this.clearClaim(a, cardId, token);
        return true;
      }
      return false;
    }
    const claimedAt = num(/@(\d+):[^:]*$/.exec(token)?.[1]) ?? -1;
    // Types the claim deferred did not run: an owner treats them as a stale token would.
    const deferred = new Set(owned ? (hash.get('dfr') ?? '').split(',').filter((t) => t !== '') : []);
    // Deleting due:t says t is no longer polled: only an owner without an upsert during its claim,
    // and not for a type whose request stays pending (made after the claim, or deferred).
    const mayDrop = owned && !hash.has('ups');
    const droppable = (type: string): boolean => {
      const req = num(hash.get(`req:${type}`));
      return mayDrop && !(req !== null && (req >= claimedAt || deferred.has(type)));
    };
    const floors = new Map<string, number | null>();
    const protectedTypes = new Map<string, boolean>();
    const typeOf = (field: string): string | null => {
      for (const prefix of ['due:', 'cfm:', 'exp:']) if (field.startsWith(prefix)) return field.slice(prefix.length);
      return null;
    };
    const protect = (type: string): boolean => {
      const known = protectedTypes.get(type);
      if (known !== undefined) return known;
      const req = num(hash.get(`req:${type}`));
      let floor: number | null = null;
      if (owned && !deferred.has(type)) {
        if (req !== null && req >= claimedAt) floor = req;
      } else {
        floor = num(hash.get(`due:${type}`));
        if (req !== null && (floor === null || req < floor)) floor = req;
      }
      const isProtected = floor !== null || !owned || deferred.has(type);
      protectedTypes.set(type, isProtected);
      floors.set(type, floor);
      return isProtected;
    };
    const writable = (field: string): boolean => {
      const type = typeOf(field);
      if (type === null) return true;
      if (field.startsWith('due:')) {
        // A finish never creates a due (the type is not polled).
        if (!hash.has(field)) return false;
        protect(type);
        return true;
      }
      return !protect(type);
    };
    for (const [field, value] of set) if (writable(field)) hash.set(field, value);
    for (const field of del) {
      if (field.startsWith('due:')) {
        const type = field.slice(4);
        if (!droppable(type)) continue;
        protectedTypes.set(type, false);
        floors.set(type, null);
        hash.delete(field);
        hash.delete(`req:${type}`);
      } else if (field.startsWith('req:')) {
        if (droppable(field.slice(4))) hash.delete(field);
      } else if (writable(field)) hash.delete(field);
    }
    if (owned) {
      for (const [field, value] of [...hash]) {
        if (!field.startsWith('req:')) continue;
        const req = num(value);
        if ((req !== null && req >= claimedAt) || deferred.has(field.slice(4))) protect(field.slice(4));
        else hash.delete(field);
      }
    }
    for (const [type, floor] of floors) {
      if (floor === null) continue;
      const due = num(hash.get(`due:${type}`));
      if (due !== null && due > floor) hash.set(`due:${type}`, String(floor));
    }
    if (!owned) return false;
    // The owner's finish drops the exec key whatever it holds (only the owner can hold a right).
    a.claim.delete(cardId);
    a.exec.delete(cardId);
    a.running.delete(token);
    hash.delete('dfr');
    hash.delete('ups');
    const score = earliestDue(hash) ?? now + NO_DUE_RETRY_MS;
    if (hash.get('prio') === '1') {
      a.queue.delete(cardId);
      a.prio.set(cardId, score);
    } else {
      a.prio.delete(cardId);
      a.queue.set(cardId, score);
    }
    return true;
  }

  /** Returns the script's answer and the types actually requested. */
  requestCheck(
    accountId: string,
    input: {
      cardId: string;
      now: number;
      cooldownMs: number;
      delays: string;
      expected: string;
      lane: 'priority' | 'normal';
      types: readonly string[];
    },
  ): { reply: number; types: string[] } {
    const a = this.account(accountId);
    const { cardId, now } = input;
    const prioScore = a.prio.get(cardId);
    const queueScore = a.queue.get(cardId);
    const hash = a.due.get(cardId);
    if ((prioScore === undefined && queueScore === undefined) || !hash) return { reply: -1, types: [] };
    const types: string[] = [];
    for (const type of input.types) {
      const lastOk = num(hash.get(`ok:${type}`));
      if (input.cooldownMs > 0 && lastOk !== null && lastOk > 0 && now - lastOk < input.cooldownMs) continue;
      const due = num(hash.get(`due:${type}`));
      hash.set(`due:${type}`, String(due === null || due > now ? now : due));
      hash.set(`req:${type}`, String(now));
      if (input.delays !== '') {
        hash.set(`cfm:${type}`, input.delays);
        if (input.expected !== '') hash.set(`exp:${type}`, input.expected);
        else hash.delete(`exp:${type}`);
      }
      types.push(type);
    }
    if (types.length === 0) return { reply: 0, types };
    const current = a.claim.get(cardId);
    const claimed = current !== undefined && this.liveExpiry(a, cardId, current, now) !== null;
    if (input.lane === 'priority') {
      hash.set('prio', '1');
      if (claimed) return { reply: types.length, types };
      const old = prioScore ?? queueScore ?? now;
      a.queue.delete(cardId);
      a.prio.set(cardId, Math.min(old, now));
      return { reply: types.length, types };
    }
    if (claimed) return { reply: types.length, types };
    const lane = prioScore !== undefined ? a.prio : a.queue;
    lane.set(cardId, Math.min(lane.get(cardId) ?? now, now));
    return { reply: types.length, types };
  }

  /** `caps`: the types written conditionally (keep the held due, at most lowered to the cap; the given due only when none is held). */
  upsert(accountId: string, cardId: string, now: number, dues: readonly [string, number][], caps: ReadonlyMap<string, number> = new Map()): void {
    const a = this.account(accountId);
    if (dues.length === 0) {
      this.remove(accountId, cardId);
      return;
    }
    let hash = a.due.get(cardId);
    if (!hash) {
      hash = new Map();
      a.due.set(cardId, hash);
    }
    const wanted = new Set<string>();
    let earliest: number | null = null;
    for (const [type, given] of dues) {
      let due = given;
      const cap = caps.get(type);
      const held = num(hash.get(`due:${type}`));
      if (cap !== undefined && held !== null) due = Math.min(held, cap);
      const req = num(hash.get(`req:${type}`));
      if (req !== null && req < due) due = req;
      wanted.add(type);
      hash.set(`due:${type}`, String(due));
      if (earliest === null || due < earliest) earliest = due;
    }
    hash.set('carrier', accountId);
    for (const field of [...hash.keys()]) {
      if (!field.startsWith('due:')) continue;
      const type = field.slice(4);
      if (!wanted.has(type)) {
        hash.delete(field);
        hash.delete(`req:${type}`);
      }
    }
    let score = earliest ?? now;
    const current = a.claim.get(cardId);
    if (current !== undefined) {
      const expiry = this.liveExpiry(a, cardId, current, now);
      if (expiry !== null) {
        if (expiry > score) score = expiry;
        hash.set('ups', '1');
      }
    }
    if (a.prio.has(cardId)) a.prio.set(cardId, score);
    else a.queue.set(cardId, score);
  }

  remove(accountId: string, cardId: string): boolean {
    const a = this.account(accountId);
    const was = a.prio.delete(cardId) || a.queue.delete(cardId);
    a.prio.delete(cardId);
    a.queue.delete(cardId);
    a.due.delete(cardId);
    return was;
  }
}
