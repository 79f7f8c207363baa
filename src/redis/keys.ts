/**
 * The only place that spells Redis key names (docs/design.md, 'Keys').
 *
 * Every key of one carrier account carries the hash tag `{c<carrierId>}` so that each Lua script
 * touches a single slot and the layout runs unchanged on Redis Cluster. `namespace` is prepended
 * to every key (empty in production); tests use it to isolate themselves on a shared Redis.
 */
export interface AccountKeys {
  /** `…poll:{c<id>}:` — prefix shared by every key of the account; scripts derive card keys from it. */
  readonly base: string;
  readonly prio: string;
  readonly queue: string;
  readonly running: string;
  readonly dispatch: string;
  /** HASH of execution-start statistics since the last claim round (starts, summed start lag). */
  readonly engine: string;
  /** STRING: the instant (ms) the account's scheduler sleeps until (lua/markIdle.lua); absent = it ticks. */
  readonly idle: string;
  /** STRING: the generation of the claim loop activity that owns the account's claiming (SCHEDULER_LOOP=activity); `stopped` = none may claim. */
  readonly loop: string;
  /** STRING (expiring): the claim loop activity's last status view, JSON (what the status query answers in workflow loops). */
  readonly loopView: string;
  due(cardId: string): string;
  claim(cardId: string): string;
  exec(cardId: string): string;
  /** STRING `<token>|<owned>|<record>`: the last recorded finish of the card, so a retry replays it. */
  finished(cardId: string): string;
  /**
   * STRING: what the record of the run holding `token` needs (its steps' results), written just
   * before that run's finish and kept FINISHED_RUN_TTL_MS, so a run replayed after its worker died
   * past the finish still writes its record. One per token: a newer claim's finish replaces nothing.
   */
  finishedRun(cardId: string, token: string): string;
  rateLimit(group: string): string;
}

export function accountKeys(namespace: string, carrierId: string | number): AccountKeys {
  const base = `${namespace}poll:{c${String(carrierId)}}:`;
  return {
    base,
    prio: `${base}prio`,
    queue: `${base}queue`,
    running: `${base}running`,
    dispatch: `${base}dispatch`,
    engine: `${base}engine`,
    idle: `${base}idle`,
    loop: `${base}loop`,
    loopView: `${base}loopview`,
    due: (cardId) => `${base}card:${cardId}:due`,
    claim: (cardId) => `${base}card:${cardId}:claim`,
    exec: (cardId) => `${base}card:${cardId}:exec`,
    finished: (cardId) => `${base}card:${cardId}:fin`,
    finishedRun: (cardId, token) => `${base}card:${cardId}:run:${token}`,
    rateLimit: (group) => `${base}rl:${group}`,
  };
}

/** Keys that are not per account (global locks etc.). No hash tag: never used inside a script with account keys. */
export function globalKeys(namespace: string): {
  readonly rebuildLock: string;
  readonly modeLock: string;
  readonly rebuiltMarker: string;
  readonly engineShares: string;
} {
  return {
    // HASH carrierId → JSON EngineShareEntry: each account's execution rate, for fair shares of a saturated engine.
    engineShares: `${namespace}poll:meta:engine-shares`,
    rebuildLock: `${namespace}poll:lock:rebuild`,
    modeLock: `${namespace}poll:lock:mode`,
    // Written after a complete rebuild; its absence means this Redis lost its data (flushed, replaced).
    rebuiltMarker: `${namespace}poll:meta:rebuilt`,
  };
}
