/**
 * Loads the Lua scripts in `lua/` and registers them on an ioredis connection.
 *
 * Scripts are plain files (one per script, header documenting KEYS/ARGV/return). A line
 * `--@include <name>` is replaced by `lua/includes/<name>.lua`, so shared helpers live in one
 * place. ioredis' `defineCommand` sends EVALSHA and falls back to EVAL once when the server does
 * not know the script yet (e.g. after a restart), so every script is loaded once and called by SHA.
 * On a Redis Cluster this holds per node: ioredis sends EVAL the first time a script goes over a
 * node's socket and EVALSHA after, and on NOSCRIPT (a promoted replica, a restarted node) resends
 * it as EVAL to the node that owns the slot, so no SCRIPT LOAD on every node is needed.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isCluster, type RedisConnection } from './connection.js';

export const LUA_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../lua');

const INCLUDE = /^--@include\s+([a-zA-Z0-9_-]+)\s*$/gm;

const sourceCache = new Map<string, string>();

/** Reads `lua/<name>.lua` with its includes resolved (each include inserted once). */
export function loadLuaSource(name: string): string {
  const cached = sourceCache.get(name);
  if (cached !== undefined) return cached;
  const seen = new Set<string>();
  const expand = (file: string): string =>
    readFileSync(file, 'utf8').replace(INCLUDE, (_line, include: string) => {
      if (seen.has(include)) return '';
      seen.add(include);
      return expand(join(LUA_DIR, 'includes', `${include}.lua`));
    });
  const source = expand(join(LUA_DIR, `${name}.lua`));
  sourceCache.set(name, source);
  return source;
}

export interface ScriptDefinition {
  /** File name in `lua/` without the extension; also the ioredis command name. */
  readonly name: string;
  /** How many of a call's parameters are keys; 'variable' = each call says (its keys' count goes first). */
  readonly numberOfKeys: number | 'variable';
}

/** Scripts whose calls pass their number of keys first (registered with 'variable'). */
const variableKeys = new Set<string>();

/** A script call's parameters as its registered command takes them. */
export function scriptParams(name: string, keys: readonly string[], args: readonly (string | number)[]): (string | number)[] {
  return variableKeys.has(name) ? [keys.length, ...keys, ...args] : [...keys, ...args];
}

/**
 * Registers scripts on a connection (idempotent per connection) and returns a caller that runs
 * one by name through EVALSHA.
 */
export function registerScripts(redis: RedisConnection, definitions: readonly ScriptDefinition[]): void {
  for (const definition of definitions) {
    if (definition.numberOfKeys === 'variable') variableKeys.add(definition.name);
    if (typeof (redis as unknown as Record<string, unknown>)[definition.name] === 'function') continue;
    const lua = loadLuaSource(definition.name);
    // Without numberOfKeys ioredis takes the count from the call's first parameter.
    redis.defineCommand(definition.name, definition.numberOfKeys === 'variable' ? { lua } : { numberOfKeys: definition.numberOfKeys, lua });
  }
}

/** Calls a registered script. Arguments are stringified by ioredis. */
export async function callScript(redis: RedisConnection, name: string, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
  const params = scriptParams(name, keys, args);
  // ioredis' auto-pipelining picks a cluster call's node from its first parameter: for a script that
  // passes its key count first that is the count, not a key, so two such calls of different slots
  // could share one pipeline ("All keys in the pipeline should belong to the same slots allocation
  // group"). On a cluster such a call goes in a pipeline of its own, which ioredis routes by its keys.
  if (variableKeys.has(name) && isCluster(redis)) {
    const pipeline = redis.pipeline();
    // Queued on the pipeline (its exec answers), not sent.
    void scriptCommand(pipeline, name).call(pipeline, ...params);
    const [reply] = (await pipeline.exec()) ?? [];
    if (!reply) throw new Error(`Lua script ${name}: no pipeline reply`);
    if (reply[0]) throw reply[0];
    return reply[1];
  }
  return scriptCommand(redis, name).call(redis, ...params);
}

function scriptCommand(target: object, name: string): (...params: (string | number)[]) => Promise<unknown> {
  const command = (target as Record<string, unknown>)[name];
  if (typeof command !== 'function') throw new Error(`Lua script ${name} is not registered on this connection`);
  return command as (...params: (string | number)[]) => Promise<unknown>;
}
