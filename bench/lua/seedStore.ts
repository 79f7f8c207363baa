/**
 * Calls the seed's scripts (bench/lua/seed/) the way the Go service's store, carrierqueue/store.go,
 * called them — KEYS and ARGV in the same order and format — on an ioredis connection, by SHA
 * (defineCommand: EVALSHA, EVAL once when unknown), as our store runs ours. That Go file is not
 * copied into this repository (only the scripts are, as a benchmark baseline): this file is where
 * its calling convention is written down.
 *
 * Not in the seed's scripts, so chosen here: the names behind constants.RedisCarrier{Priority,}
 * QueueKey / RedisCarrierRunningKey / RedisCardExecKey (that service's pkg/constants). The
 * account keys live under the run's namespace; the exec key follows the claim script's card key
 * spelling with ':exec'. The claim and due keys are the ones the claim script hard-codes.
 */
import type { Redis } from 'ioredis';
import type { SeedScripts } from './seedScripts.js';

export interface SeedClaimed {
  readonly cardId: string;
  readonly token: string;
}

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

function command(redis: Redis, name: string): ScriptFn {
  const fn = (redis as unknown as Record<string, unknown>)[name];
  if (typeof fn !== 'function') throw new Error(`seed script ${name} is not registered`);
  return (...args) => (fn as ScriptFn).apply(redis, args);
}

export class SeedStore {
  private readonly claimFn: ScriptFn;
  private readonly acquireFn: ScriptFn;
  private readonly finishFn: ScriptFn;

  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
    private readonly seed: SeedScripts,
  ) {
    const definitions = { seedClaim: [seed.scripts.claim, 3], seedAcquireExec: [seed.scripts.acquireExec, 2], seedFinish: [seed.scripts.finish, 6] } as const;
    for (const [name, [lua, numberOfKeys]] of Object.entries(definitions)) {
      if (typeof (redis as unknown as Record<string, unknown>)[name] !== 'function') redis.defineCommand(name, { lua, numberOfKeys });
    }
    this.claimFn = command(redis, 'seedClaim');
    this.acquireFn = command(redis, 'seedAcquireExec');
    this.finishFn = command(redis, 'seedFinish');
  }

  private account(carrierId: string): { prio: string; queue: string; running: string } {
    const base = `${this.namespace}seed:carrier:${carrierId}:`;
    return { prio: `${base}prio`, queue: `${base}queue`, running: `${base}running` };
  }

  dueKey(cardId: string): string {
    return `${this.seed.cardKeyPrefix}${cardId}${this.seed.dueSuffix}`;
  }

  private claimKey(cardId: string): string {
    return `${this.seed.cardKeyPrefix}${cardId}${this.seed.claimSuffix}`;
  }

  private execKey(cardId: string): string {
    return `${this.seed.cardKeyPrefix}${cardId}:exec`;
  }

  /** What the seed's Upsert writes (a Go pipeline, not a script): the due hash and the normal lane. */
  async upsertMany(cards: readonly { carrierId: string; cardId: string; dues: Record<string, number> }[]): Promise<void> {
    await Promise.all(
      cards.map(async (card) => {
        const fields: Record<string, string | number> = { carrier: card.carrierId };
        for (const [type, due] of Object.entries(card.dues)) fields[`due:${type}`] = due;
        await this.redis.hset(this.dueKey(card.cardId), fields);
        await this.redis.zadd(this.account(card.carrierId).queue, Math.min(...Object.values(card.dues)), card.cardId);
      }),
    );
  }

  /** claimLua: KEYS prio, queue, running; ARGV now, lease, limit, ratio (%.3f), prefix, budget, type groups, countRealname. */
  async claim(input: {
    carrierId: string;
    now: number;
    leaseMs: number;
    inflightLimit: number;
    priorityRatio: number;
    tokenPrefix: string;
    groupBudget: Record<string, number>;
    typeGroups: Record<string, string>;
  }): Promise<SeedClaimed[]> {
    const keys = this.account(input.carrierId);
    const budget = Object.entries(input.groupBudget)
      .map(([group, n]) => `${group}=${n}`)
      .join(';');
    const types = Object.entries(input.typeGroups)
      .map(([type, group]) => `${type}=${group}`)
      .join(';');
    const reply = await this.claimFn(
      keys.prio,
      keys.queue,
      keys.running,
      input.now,
      input.leaseMs,
      input.inflightLimit,
      input.priorityRatio.toFixed(3),
      input.tokenPrefix,
      budget,
      types,
      '0',
    );
    if (!Array.isArray(reply)) throw new Error(`seed claim: unexpected reply ${JSON.stringify(reply)}`);
    const claimed: SeedClaimed[] = [];
    for (let i = 1; i + 2 < reply.length; i += 3) claimed.push({ cardId: String(reply[i]), token: String(reply[i + 1]) });
    return claimed;
  }

  /** acquireExecLua: KEYS claim, exec; ARGV token, exec value, ttl ms → 1 acquired, 0 not the claim, -1 taken. */
  async acquireExec(cardId: string, token: string, executorId: string, ttlMs: number): Promise<number> {
    return Number(await this.acquireFn(this.claimKey(cardId), this.execKey(cardId), token, executorId, ttlMs));
  }

  /** finishLua: KEYS due, claim, exec, running, prio, queue; ARGV token, card id, now, n, n field/value pairs, fields to delete → 1 finished. */
  async finish(input: {
    carrierId: string;
    cardId: string;
    token: string;
    now: number;
    set: Record<string, string | number>;
    del: readonly string[];
  }): Promise<boolean> {
    const keys = this.account(input.carrierId);
    const pairs = Object.entries(input.set).flatMap(([field, value]) => [field, value]);
    const reply = await this.finishFn(
      this.dueKey(input.cardId),
      this.claimKey(input.cardId),
      this.execKey(input.cardId),
      keys.running,
      keys.prio,
      keys.queue,
      input.token,
      input.cardId,
      input.now,
      Object.keys(input.set).length,
      ...pairs,
      ...input.del,
    );
    return Number(reply) === 1;
  }
}
