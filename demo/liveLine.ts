/**
 * The line `npm start` prints every few seconds: per account checks/s, budget use, lateness p99,
 * staleness p99 (where the carrier dates its changes), in-flight against its adaptive limit, what limits the account now, open alerts.
 */
import type { Pool } from '../src/db/pool.js';
import { listCarriers } from '../src/db/carriers.js';
import type { CarrierQueueStore } from '../src/redis/carrierQueueStore.js';
import type { SimulatorControl } from '../src/simulator/control.js';
import type { SchedulerStatus } from '../src/workflow-safe/loopStatus.js';
import type { CpuWindow } from './cpuMeter.js';
import { availableParallelism } from 'node:os';

/** How often the line is printed, unless the deps say otherwise. */
const DEFAULT_EVERY_MS = 5000;
/**
 * Accounts shown one by one (the busiest in the window, the oldest first among equals: the demo's);
 * the others are summed in one part. Each shown account costs a status query to its scheduler per
 * line, and a line per account made 100 added accounts cost the live line 100 queries every 5 s.
 */
export const LIVE_ACCOUNTS = 6;

interface Row {
  carrier_id: string;
  executions: string;
  p99: number | null;
  stale_p99: number | null;
  alerts: string;
}

export interface LiveLineDeps {
  readonly pool: Pool;
  readonly store: CarrierQueueStore;
  readonly simulator: SimulatorControl | undefined;
  /** The account's scheduler status (its orchestration view), or undefined when it does not answer. */
  readonly scheduler: (carrierId: string) => Promise<SchedulerStatus | undefined>;
  readonly log: (line: string) => void;
  /** Print period (default 5 s); the checks/s figure counts executions over it. */
  readonly everyMs?: number;
  /** CPU of the demo's processes per check: the line ends with what the machine sustains at that cost. */
  readonly cpu?: { window(checks: number): CpuWindow | undefined };
}

/** `machine 6.1 ms CPU/check (workers 2.0, temporal 3.9, simulator 0.2) ≈ 650 checks/s on 2 cores` */
function machineOf(window: CpuWindow | undefined): string {
  if (!window) return 'machine: no checks in the window';
  const parts = Object.entries(window.perCheckMs).map(([label, ms]) => `${label} ${ms.toFixed(1)}`);
  const sustains = Number.isFinite(window.sustainablePerSec) ? `≈ ${Math.round(window.sustainablePerSec)} checks/s on ${availableParallelism()} cores` : '';
  return `machine ${window.totalPerCheckMs.toFixed(1)} ms CPU/check (${parts.join(', ')}) ${sustains}`;
}

const LIMIT_LABELS = {
  none: 'keeping up',
  budget: 'limited by budget',
  inflight: 'limited by in-flight limit',
  orchestration: 'limited by orchestration',
  ingest: 'limited by ingest backlog',
} as const;

/** `limited by orchestration (engine 31.2/s)`, or `?` when the scheduler does not answer. */
function limitOf(status: SchedulerStatus | undefined): string {
  if (!status) return 'scheduler ?';
  const view = status.orchestration;
  const engine = view.capacityPerSec === null ? `${view.startsPerSec}/s started` : `engine ${view.capacityPerSec}/s`;
  return `${LIMIT_LABELS[view.limitedBy]} (${engine}, lag ${view.startLagMs}ms)`;
}

/** `stop` resolves once the tick in flight (at most one runs) has ended: its connections may be closed after that. */
export function startLiveLine(deps: LiveLineDeps): { stop(): Promise<void> } {
  const everyMs = deps.everyMs ?? DEFAULT_EVERY_MS;
  let previousCalls = new Map<string, number>();
  let previousAt = Date.now();
  const tick = async (): Promise<void> => {
    const carriers = await listCarriers(deps.pool);
    const { rows } = await deps.pool.query<Row>(
      `SELECT c.id::text AS carrier_id,
              (SELECT count(*) FROM card_execution e WHERE e.carrier_id = c.id AND e.finished_at > now() - make_interval(secs => $1))::text AS executions,
              (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY (e.details->>'latenessMs')::double precision)
                 FROM card_execution e WHERE e.carrier_id = c.id AND e.started_at > now() - interval '1 minute') AS p99,
              (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM k.learned_at - k.changed_at) * 1000)
                 FROM card_change k WHERE k.carrier_id = c.id AND k.learned_at > now() - interval '1 hour') AS stale_p99,
              (SELECT count(*) FROM polling_failure_alert a WHERE a.carrier_id = c.id AND a.status = 'open')::text AS alerts
         FROM carrier_account c ORDER BY c.id`,
      [everyMs / 1000],
    );
    // A simulator that does not answer leaves the budget figures out, not the whole line.
    const stats = await deps.simulator?.stats({ cards: false }).catch(() => undefined);
    const now = Date.now();
    const seconds = (now - previousAt) / 1000;
    const calls = new Map<string, number>();
    const parts: string[] = [];
    const rowOf = new Map(rows.map((row) => [row.carrier_id, row]));
    const executionsOf = (id: string): number => Number(rowOf.get(id)?.executions ?? 0);
    const checks = carriers.reduce((sum, carrier) => sum + executionsOf(carrier.id), 0);
    // The busiest first; among equals the order of creation (carriers come ordered by id).
    const shown = [...carriers].sort((a, b) => executionsOf(b.id) - executionsOf(a.id)).slice(0, LIVE_ACCOUNTS);
    const shownIds = new Set(shown.map((carrier) => carrier.id));
    for (const carrier of carriers.filter((c) => shownIds.has(c.id))) {
      const row = rowOf.get(carrier.id);
      // Both settle before the tick ends, even when one fails (Redis away): a scheduler query left
      // running (retrying) past the tick would outlive stop() and meet a closed connection.
      const [depthRead, schedulerRead] = await Promise.allSettled([deps.store.depths(carrier.id), deps.scheduler(carrier.id)]);
      if (depthRead.status === 'rejected') throw depthRead.reason;
      const depth = depthRead.value;
      const scheduler = schedulerRead.status === 'fulfilled' ? schedulerRead.value : undefined;
      const groups = stats?.accounts[carrier.gatewayAccount]?.groups ?? {};
      // Only the calls the account's budget groups are charged for: realname calls outside any group
      // (no real-name control) counted against the groups' budget read 154 % on a healthy system. A
      // gateway account the simulator was never told the groups of counts every call in one
      // `default` group: then all of them are the account's.
      const charged = carrier.groups.filter((g) => groups[g.name] !== undefined);
      const total =
        charged.length === 0 ? Object.values(groups).reduce((sum, g) => sum + g.calls, 0) : charged.reduce((sum, g) => sum + (groups[g.name]?.calls ?? 0), 0);
      calls.set(carrier.id, total);
      const budget = carrier.groups.reduce((sum, g) => sum + g.qps, 0);
      const callRate = previousCalls.has(carrier.id) ? (total - (previousCalls.get(carrier.id) ?? 0)) / seconds : 0;
      const use = stats ? ` budget ${((100 * callRate) / budget).toFixed(0)}% (${callRate.toFixed(1)}/${budget} qps)` : '';
      parts.push(
        `${carrier.name}: ${(Number(row?.executions ?? 0) / (everyMs / 1000)).toFixed(1)} checks/s${use} late p99 ` +
          `${row?.p99 == null ? '-' : `${Math.round(row.p99)}ms`}` +
          // Staleness only where the carrier dated changes in the last hour (a change until known here).
          `${row?.stale_p99 == null ? '' : ` stale p99 ${Math.round(row.stale_p99)}ms`} inflight ` +
          `${depth.running}/${scheduler?.orchestration.inflightLimit ?? '?'} ${limitOf(scheduler)} alerts ` +
          `${row?.alerts ?? 0}`,
      );
    }
    const others = carriers.filter((carrier) => !shownIds.has(carrier.id));
    if (others.length > 0) {
      const otherRows = others.map((carrier) => rowOf.get(carrier.id));
      const executions = others.reduce((sum, carrier) => sum + executionsOf(carrier.id), 0);
      const p99s = otherRows.flatMap((row) => (row?.p99 == null ? [] : [row.p99]));
      const alerts = otherRows.reduce((sum, row) => sum + Number(row?.alerts ?? 0), 0);
      parts.push(
        `+${others.length} more accounts: ${(executions / (everyMs / 1000)).toFixed(1)} checks/s late p99 ` +
          `${p99s.length === 0 ? '-' : `≤ ${Math.round(Math.max(...p99s))}ms`} alerts ${alerts}`,
      );
    }
    previousCalls = calls;
    previousAt = now;
    if (deps.cpu) parts.push(machineOf(deps.cpu.window(checks)));
    deps.log(`[live] ${new Date().toISOString().slice(11, 19)} ${parts.join(' | ')}`);
  };
  // One tick at a time: a tick held up by an outage (a query retrying against a scheduler that does
  // not answer) would otherwise overlap the next ones, and stop() could not wait for them all.
  let inFlight: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (inFlight) return;
    inFlight = tick()
      .catch((error: unknown) => deps.log(`[live] ${String(error)}`))
      .finally(() => {
        inFlight = undefined;
      });
  }, everyMs);
  return {
    stop: async () => {
      clearInterval(timer);
      await inFlight;
    },
  };
}
