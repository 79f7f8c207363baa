/**
 * Command line and environment of `npm run bench`. Every duration has a default that keeps one
 * scenario within about two minutes on a 2-core machine; flags win over BENCH_* variables so a
 * one-off run needs no environment changes.
 */
export const SCENARIOS = ['saturate', 'steady', 'priority', 'throughput', 'direct', 'scale'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface BenchOptions {
  readonly scenarios: readonly ScenarioName[];
  /** Seconds before the measuring window opens (undefined = the scenario's default). */
  readonly warmupSec: number | undefined;
  /** Length of the measuring window in seconds (undefined = the scenario's default). */
  readonly durationSec: number | undefined;
  /** scale: cards written to Redis. */
  readonly cards: number;
  /** scale: through the lifecycle service (PostgreSQL + Redis) or straight into Redis. */
  readonly importMode: 'lifecycle' | 'redis';
  /** priority: request-checks per second. */
  readonly requestRate: number;
  readonly help: boolean;
}

export const HELP = `usage: npm run bench -- [--scenario NAME[,NAME…]] [options]

Scenarios (default: all, in this order):
  saturate    3 accounts with far more due cards than their budgets: utilisation, rejected calls, deferrals
  steady      offered load at ~70 % of the budget: lateness p50/p95/p99/max
  priority    steady load + request-checks at a fixed rate: request → first gateway call p50/p99
  throughput  budgets high, gateway latency ~0: executions/s, CPU per process, cost per execution
  direct      the throughput workload through a direct loop over the same Lua scripts (no Temporal)
  scale       N cards in Redis: memory per card, claim round p99, import time

Options (flag / environment):
  --scenario NAME      BENCH_SCENARIO      comma-separated list
  --warmup SEC         BENCH_WARMUP_SEC    seconds before the measuring window (per-scenario default)
  --duration SEC       BENCH_DURATION_SEC  measuring window in seconds (per-scenario default)
  --cards N            BENCH_CARDS         scale: cards to import (default 1000000)
  --import MODE        BENCH_IMPORT        scale: redis (upsert.lua only, default) or lifecycle (PostgreSQL + Redis)
  --request-rate R     BENCH_REQUEST_RATE  priority: request-checks per second (default 1)
  --help

Results: bench/results/<scenario>.json and .md; the Markdown tables are printed at the end.
Services (Temporal dev server, Redis, PostgreSQL) are started when not running.`;

function flagValue(argv: readonly string[], name: string): string | undefined {
  const index = argv.findIndex((arg) => arg === name || arg.startsWith(`${name}=`));
  if (index < 0) return undefined;
  const arg = argv[index]!;
  if (arg.includes('=')) return arg.slice(arg.indexOf('=') + 1);
  const value = argv[index + 1];
  if (value === undefined || value.startsWith('--')) throw new Error(`${name} needs a value`);
  return value;
}

function positive(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

function isScenario(name: string): name is ScenarioName {
  return (SCENARIOS as readonly string[]).includes(name);
}

const KNOWN_FLAGS = ['--scenario', '--warmup', '--duration', '--cards', '--import', '--request-rate', '--help', '-h'];

export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): BenchOptions {
  // Unknown flags are errors: a typo must not silently run the two-minute default.
  for (const arg of argv) {
    if (arg.startsWith('-') && !KNOWN_FLAGS.includes(arg.split('=')[0]!)) throw new Error(`unknown option ${arg}`);
  }
  const help = argv.includes('--help') || argv.includes('-h');
  const scenarioList = flagValue(argv, '--scenario') ?? env.BENCH_SCENARIO ?? '';
  const scenarios: ScenarioName[] = [];
  for (const name of scenarioList.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    if (!isScenario(name)) throw new Error(`unknown scenario "${name}" (one of ${SCENARIOS.join(', ')})`);
    scenarios.push(name);
  }
  // Redis by default: the lifecycle path imports ~5 000 cards/s here, over three minutes for a million.
  const importMode = flagValue(argv, '--import') ?? env.BENCH_IMPORT ?? 'redis';
  if (importMode !== 'lifecycle' && importMode !== 'redis') throw new Error(`--import must be lifecycle or redis, got "${importMode}"`);
  return {
    scenarios: scenarios.length > 0 ? scenarios : [...SCENARIOS],
    warmupSec: positive('--warmup', flagValue(argv, '--warmup') ?? env.BENCH_WARMUP_SEC),
    durationSec: positive('--duration', flagValue(argv, '--duration') ?? env.BENCH_DURATION_SEC),
    cards: Math.floor(positive('--cards', flagValue(argv, '--cards') ?? env.BENCH_CARDS) ?? 1_000_000),
    importMode,
    requestRate: positive('--request-rate', flagValue(argv, '--request-rate') ?? env.BENCH_REQUEST_RATE) ?? 1,
    help,
  };
}
