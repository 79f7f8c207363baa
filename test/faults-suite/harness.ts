/**
 * Shared pieces of the fault-injection suite (`npm run test:faults`): the project's entry points as
 * processes of their own, a TCP cut-off in front of the simulator, the invariants checked after
 * every fault, and the summary table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Stack } from '../../testkit/orchestration.js';
import { waitFor } from '../../testkit/seed.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface EntryProcess {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<string>;
}

export function spawnEntry(name: string, script: string, env: Record<string, string>): EntryProcess {
  const child = spawn(process.execPath, [...typescriptExecArgv(), script], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // Keep the tail only: a long outage makes a chatty process.
  const append = (chunk: Buffer): void => void (output = (output + chunk.toString('utf8')).slice(-200_000));
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? String(code))));
  return { name, child, output: () => output, exited };
}

export const isRunning = (entry: EntryProcess): boolean => entry.child.exitCode === null && entry.child.signalCode === null;

export async function waitUntilReady(entry: EntryProcess, line: string, timeoutMs = 90_000): Promise<void> {
  await waitFor(
    `the ${entry.name} process to start`,
    async () => {
      if (!isRunning(entry)) throw new Error(`${entry.name} exited early:\n${entry.output().slice(-3000)}`);
      return entry.output().includes(line);
    },
    timeoutMs,
    100,
  );
}

export async function killEntry(entry: EntryProcess): Promise<void> {
  if (!isRunning(entry)) return;
  entry.child.kill('SIGKILL');
  await entry.exited;
}

/**
 * A TCP relay in front of the simulator: closing it makes the gateway unreachable (connections
 * reset, new ones refused) while the simulator keeps its world and its statistics.
 */
export interface Relay {
  readonly url: string;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startRelay(targetUrl: string): Promise<Relay> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    const s = createServer((inbound) => {
      const outbound = connect(Number(target.port), target.hostname);
      sockets.add(inbound).add(outbound);
      const drop = (): void => {
        inbound.destroy();
        outbound.destroy();
        sockets.delete(inbound);
        sockets.delete(outbound);
      };
      inbound.on('error', drop).on('close', drop);
      outbound.on('error', drop).on('close', drop);
      inbound.pipe(outbound).pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('relay has no port');
    port = address.port;
    server = s;
  };
  const cut = async (): Promise<void> => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await listen();
  return { url: `http://127.0.0.1:${port}`, cut, restore: listen, close: cut };
}

/** One row of the summary table. */
export interface FaultRow {
  fault: string;
  recoverySec: number | null;
  cardsChecked: number;
  cards: number;
  lost: number;
  duplicates: number;
  notes: string;
}

export function renderTable(rows: readonly FaultRow[]): string {
  const lines = [
    '| fault | recovery (s) | cards checked after | lost | duplicates | notes |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.fault} | ${r.recoverySec === null ? 'none' : r.recoverySec.toFixed(1)} | ${r.cardsChecked}/${r.cards} | ` +
        `${r.lost} | ${r.duplicates} | ${r.notes.replace(/\|/g, '/')} |`,
    ),
  ];
  return lines.join('\n');
}

export function writeTable(rows: readonly FaultRow[]): string {
  const table = renderTable(rows);
  mkdirSync(`${ROOT}test-results`, { recursive: true });
  writeFileSync(`${ROOT}test-results/faults.md`, `# Fault-injection suite (${new Date().toISOString()})\n\n${table}\n`);
  return table;
}

export interface Invariants {
  /** Cards in no lane (and not running) or in both lanes. */
  readonly laneProblems: string[];
  readonly duplicates: number;
  readonly duplicateSamples: string[];
  /** Cards the simulator saw executed twice at once (cumulative). */
  readonly concurrentCards: string[];
  /** Groups with a rejected call or a one-second window over the QPS (cumulative). */
  readonly budgetProblems: string[];
  /** Priority items neither terminal nor scheduled for a next run. */
  readonly strandedItems: string[];
}

/**
 * Everything that must hold after a fault (the checks README.md lists for `npm run test:faults`),
 * read from Redis, PostgreSQL and the simulator.
 */
export async function readInvariants(
  stack: Stack,
  carrierId: string,
  cardIds: readonly string[],
  gatewayAccount: string,
  qps: Record<string, number>,
): Promise<Invariants> {
  const { redis, store } = stack.deps;
  const keys = store.keys(carrierId);
  const running = await redis.zrange(keys.running, 0, -1);
  const laneProblems: string[] = [];
  for (const cardId of cardIds) {
    const [prio, queue] = await Promise.all([redis.zscore(keys.prio, cardId), redis.zscore(keys.queue, cardId)]);
    const isRunningCard = running.some((token) => token.endsWith(`:${cardId}`));
    const lanes = (prio === null ? 0 : 1) + (queue === null ? 0 : 1);
    if (lanes === 2) laneProblems.push(`card ${cardId} in both lanes`);
    else if (lanes === 0 && !isRunningCard) laneProblems.push(`card ${cardId} in no lane and not running`);
  }
  const pool = stack.db.pool;
  const byId = await pool.query<{ k: string; n: string }>(
    'SELECT observation_id AS k, count(*)::text AS n FROM card_observation GROUP BY observation_id HAVING count(*) > 1',
  );
  const byCard = await pool.query<{ k: string; n: string }>(
    "SELECT card_id || '/' || check_type || '/' || observed_at::text AS k, count(*)::text AS n FROM " +
      'card_observation GROUP BY card_id, check_type, observed_at HAVING count(*) > 1',
  );
  const dupRows = [...byId.rows, ...byCard.rows];
  const stats = await stack.simulator.stats();
  const concurrentCards = Object.entries(stats.cards ?? {})
    .filter(([, card]) => card.maxConcurrent > 1)
    .map(([iccid, card]) => `${iccid} maxConcurrent ${card.maxConcurrent}`);
  const budgetProblems: string[] = [];
  for (const [group, g] of Object.entries(stats.accounts[gatewayAccount]?.groups ?? {})) {
    const limit = qps[group] ?? 0;
    if (g.rejected > 0 || g.maxPerSecond > limit) budgetProblems.push(`${group}: rejected ${g.rejected}, maxPerSecond ${g.maxPerSecond} > qps ${limit}?`);
  }
  const items = await pool.query<{ id: string; card_id: string; status: string; next_run_at: Date | null }>(
    "SELECT id::text, card_id::text, status, next_run_at FROM polling_priority_item WHERE status NOT IN ('completed', 'failed')",
  );
  const strandedItems: string[] = [];
  for (const item of items.rows) {
    // A next run: a retry time in PostgreSQL, or the card waiting in the priority lane, or running now.
    const inPrio = (await redis.zscore(keys.prio, item.card_id)) !== null;
    const isRunningCard = running.some((token) => token.endsWith(`:${item.card_id}`));
    if (item.next_run_at === null && !inPrio && !isRunningCard) strandedItems.push(`item ${item.id} (card ${item.card_id}) ${item.status} with no next run`);
  }
  return {
    laneProblems,
    duplicates: dupRows.length,
    duplicateSamples: dupRows.slice(0, 5).map((r) => `${r.k} ×${r.n}`),
    concurrentCards,
    budgetProblems,
    strandedItems,
  };
}
