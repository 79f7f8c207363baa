/**
 * `npm run bench:lua [-- --cards N --out DIR --allow-busy]`: our carrier queue scripts beside the
 * seed's (the Go service's scripts this project was derived from, kept as a baseline in
 * bench/lua/seed/ and read by bench/lua/seedScripts.ts), in the same run, against the local Redis,
 * with the same client settings (ioredis, auto-pipelining on both) and the same work:
 *
 * - claim + acquireExec + finish cycles per second for N due cards (default 100 000) in one
 *   account, and the same N cards spread over 50 accounts (claimed concurrently, 8 connections);
 * - p50/p99 latency of one claim round of 200 cards;
 * - ours ÷ seed cycles/s per scenario (target ≥ 1.0×: our scripts at least as fast as the seed's).
 *
 * Each scenario runs --rounds times per implementation (default 3), alternating which goes first;
 * the ratio is of the two medians. Each run's keys are deleted before the next one. Writes <out>/lua.json and lua.md (default bench/results) and prints the Markdown.
 * Refused on a busy machine unless --allow-busy (then marked invalid), like `npm run bench`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { PROJECT_ROOT } from '../devstack/paths.js';
import { loadConfig } from '../src/config/index.js';
import { readEvictionPolicy } from '../src/redis/connect.js';
import { CarrierQueueStore } from '../src/redis/carrierQueueStore.js';
import { accountKeys } from '../src/redis/keys.js';
import { DueField } from '../src/redis/dueFields.js';
import { deleteMatching } from '../testkit/redis.js';
import { flagSet, flagValue, positive, rejectUnknownFlags } from './lib/options.js';
import { RESULTS_DIR, validityLines, type MachineLoad } from './lib/report.js';
import { checkBeforeRun, invalidReasons, startLoadMonitor } from './lib/machineLoad.js';
import { atLeast, renderVerdict, times, type Verdict } from './lib/verdict.js';
import { percentile } from './lib/stats.js';
import { readSeedScripts, SeedDocumentError, type SeedScripts } from './lua/seedScripts.js';
import { SeedStore } from './lua/seedStore.js';

const ROUND_SIZE = 200;
const LEASE_MS = 60_000;
const UPSERT_BATCH = 5_000;
// Connections for the multi-account run: claims of different accounts proceed in parallel.
const CONNECTIONS = 8;
const RATIO_TARGET = 1;
const GROUP_BUDGET = { g1: 10_000 };
const TYPE_GROUPS = { card_status: 'g1', carddata: 'g1', realname: 'g2' };
const HELP = `usage: npm run bench:lua -- [--cards N] [--rounds N] [--out DIR] [--allow-busy]
  --cards N     BENCH_LUA_CARDS   due cards per scenario (default 100000)
  --rounds N    BENCH_LUA_ROUNDS  runs of each implementation per scenario, alternating which goes
                                  first; the ratio is of the medians (default 3)
  --out DIR     BENCH_OUT_DIR     results folder (default bench/results)
  --allow-busy  BENCH_ALLOW_BUSY  run on a busy machine anyway (result marked invalid)`;

type Implementation = 'ours' | 'seed';

/** The three steps of one cycle, whatever scripts run them. */
interface Cycler {
  upsert(cards: readonly { carrierId: string; cardId: string; dues: Record<string, number> }[]): Promise<void>;
  claim(carrierId: string, round: number, now: number): Promise<readonly { cardId: string; token: string }[]>;
  acquire(carrierId: string, cardId: string, token: string, now: number): Promise<boolean>;
  finish(carrierId: string, cardId: string, token: string, at: number): Promise<boolean>;
}

interface ScenarioResult {
  readonly scenario: string;
  readonly implementation: Implementation;
  readonly accounts: number;
  readonly cards: number;
  readonly cycles: number;
  readonly seconds: number;
  readonly cyclesPerSecond: number;
  readonly claimRounds: number;
  readonly claimP50Ms: number;
  readonly claimP99Ms: number;
  /** Redis time inside the scripts (EVALSHA, INFO commandstats) per cycle, µs. */
  readonly redisScriptUsPerCycle: number;
  /** CPU of this process (ioredis, the store's argument building and reply parsing) per cycle, µs. */
  readonly clientCpuUsPerCycle: number;
}

function ours(redis: Redis, namespace: string): Cycler {
  const store = new CarrierQueueStore(redis, namespace);
  return {
    upsert: async (cards) => void (await store.upsertMany(cards.map((card) => ({ ...card, now: Date.now() })))),
    claim: async (carrierId, round, now) =>
      (
        await store.claim({
          carrierId,
          now,
          leaseMs: LEASE_MS,
          inflightLimit: ROUND_SIZE,
          priorityRatio: 0.5,
          tokenPrefix: `b${carrierId}-${round}`,
          groupBudget: GROUP_BUDGET,
          typeGroups: TYPE_GROUPS,
          countRealname: false,
        })
      ).claimed,
    acquire: async (carrierId, cardId, token, now) => (await store.acquireExec(carrierId, cardId, token, 'bench', LEASE_MS, now)) === 'acquired',
    finish: (carrierId, cardId, token, at) =>
      store.finish({
        carrierId,
        cardId,
        token,
        now: at,
        set: { [DueField.due('card_status')]: at + 3_600_000, [DueField.ok('card_status')]: at },
        del: [DueField.fail('card_status')],
      }),
  };
}

function seed(redis: Redis, namespace: string, scripts: SeedScripts): Cycler {
  const store = new SeedStore(redis, namespace, scripts);
  return {
    upsert: (cards) => store.upsertMany(cards),
    claim: (carrierId, round, now) =>
      store.claim({
        carrierId,
        now,
        leaseMs: LEASE_MS,
        inflightLimit: ROUND_SIZE,
        priorityRatio: 0.5,
        tokenPrefix: `b${carrierId}-${round}`,
        groupBudget: GROUP_BUDGET,
        typeGroups: TYPE_GROUPS,
      }),
    acquire: async (_carrierId, cardId, token) => (await store.acquireExec(cardId, token, 'bench', LEASE_MS)) === 1,
    // The seed's finish takes the same fields: its due:/ok:/fail: prefixes are ours too.
    finish: (carrierId, cardId, token, at) =>
      store.finish({ carrierId, cardId, token, now: at, set: { 'due:card_status': at + 3_600_000, 'ok:card_status': at }, del: ['fail:card_status'] }),
  };
}

async function seedCards(cycler: Cycler, accounts: readonly string[], cardIds: readonly string[], now: number): Promise<void> {
  for (let start = 0; start < cardIds.length; start += UPSERT_BATCH) {
    // Due over the last minute so claims walk a realistic ZSET; carddata not due.
    const batch = cardIds.slice(start, start + UPSERT_BATCH).map((cardId, j) => {
      const i = start + j;
      return { carrierId: accounts[i % accounts.length]!, cardId, dues: { card_status: now - 60_000 + (i % 60_000), carddata: now + 3_600_000 } };
    });
    await cycler.upsert(batch);
  }
}

/** One account's worth of work: claim rounds of 200 until nothing is due, each card executed. */
async function drainAccount(cycler: Cycler, carrierId: string, claimLatencies: number[]): Promise<number> {
  let cycles = 0;
  for (let round = 0; ; round += 1) {
    const now = Date.now();
    const started = performance.now();
    const claimed = await cycler.claim(carrierId, round, now);
    if (claimed.length === ROUND_SIZE) claimLatencies.push(performance.now() - started);
    if (claimed.length === 0) return cycles;
    await Promise.all(
      claimed.map(async ({ cardId, token }) => {
        if (!(await cycler.acquire(carrierId, cardId, token, now))) throw new Error(`acquireExec ${cardId} refused`);
        if (!(await cycler.finish(carrierId, cardId, token, Date.now()))) throw new Error(`finish ${cardId} lost its claim`);
      }),
    );
    cycles += claimed.length;
  }
}

function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Total µs Redis spent in EVALSHA calls since start (every script call of the run is one). */
async function scriptMicros(redis: Redis): Promise<number> {
  return Number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
}

async function runScenario(
  admin: Redis,
  cyclers: readonly Cycler[],
  implementation: Implementation,
  name: string,
  accountCount: number,
  run: string,
  cardIds: readonly string[],
): Promise<ScenarioResult> {
  // Account ids unique to the run: both implementations use their production key names (no namespace).
  const accounts = Array.from({ length: accountCount }, (_, i) => `${run}${name === 'one account' ? 'one' : 'many'}${i}`);
  await seedCards(cyclers[0]!, accounts, cardIds, Date.now());
  const latencies: number[] = [];
  const scriptUsBefore = await scriptMicros(admin);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const perAccount = await Promise.all(accounts.map((carrierId, i) => drainAccount(cyclers[i % cyclers.length]!, carrierId, latencies)));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const scriptUs = (await scriptMicros(admin)) - scriptUsBefore;
  const cycles = perAccount.reduce((sum, n) => sum + n, 0);
  if (cycles !== cardIds.length) throw new Error(`${implementation} ${name}: executed ${cycles} of ${cardIds.length} cards`);
  latencies.sort((a, b) => a - b);
  return {
    scenario: name,
    implementation,
    accounts: accountCount,
    cards: cardIds.length,
    cycles,
    seconds: Number(seconds.toFixed(2)),
    cyclesPerSecond: Math.round(cycles / seconds),
    claimRounds: latencies.length,
    claimP50Ms: Number(percentile(latencies, 50).toFixed(2)),
    claimP99Ms: Number(percentile(latencies, 99).toFixed(2)),
    redisScriptUsPerCycle: Number((scriptUs / cycles).toFixed(2)),
    clientCpuUsPerCycle: Number(((cpu.user + cpu.system) / cycles).toFixed(2)),
  };
}

/** Same settings for both implementations; auto-pipelining as production connections use. */
async function openConnections(url: string, count: number): Promise<Redis[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const redis = new Redis(url, { lazyConnect: true, connectionName: `bench-lua-${i}`, maxRetriesPerRequest: 3, enableAutoPipelining: true });
      await redis.connect();
      const policy = await readEvictionPolicy(redis);
      if (policy !== 'noeviction') throw new Error(`Redis maxmemory-policy is ${policy}; the bench needs noeviction`);
      return redis;
    }),
  );
}

interface Ratio {
  readonly scenario: string;
  readonly ours: number;
  readonly seed: number;
  readonly ratio: number;
}

function markdown(input: {
  date: string;
  redisVersion: string;
  results: readonly ScenarioResult[];
  ratios: readonly Ratio[];
  rounds: number;
  verdicts: readonly Verdict[];
  valid: boolean;
  reasons: readonly string[];
  load: MachineLoad;
  seedNotes: readonly string[];
}): string {
  const lines = [
    `# Lua scripts benchmark, ours beside the seed's (${input.date}, Redis ${input.redisVersion}, Node ${process.version})`,
    '',
    ...validityLines(input.valid, input.reasons, input.load),
    '',
    'One cycle = claim (share of a 200-card round) + acquireExec + finish for one card. Both implementations: ioredis with',
    `enableAutoPipelining, scripts by SHA, the same cards, budgets and rounds; ${CONNECTIONS} connections in the 50-account run.`,
    'Claim latency: in the one-account run each round runs alone (the script itself plus one round trip);',
    "in the 50-account run it includes queueing behind the other 49 accounts' traffic on the same Redis.",
    '',
    'Where a cycle goes: Redis µs = time inside the scripts (EVALSHA in INFO commandstats); client µs = CPU of the bench process',
    "(ioredis, the store's arguments and replies). Both run on the same cores, so cycles/s follows their sum on a small machine.",
    '',
    '| scenario | scripts | accounts | cards | cycles/s | seconds | claim rounds of 200 | claim p50 ms | claim p99 ms | Redis µs / cycle | client µs / cycle |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...input.results.map(
      (r) =>
        `| ${r.scenario} | ${r.implementation} | ${r.accounts} | ${r.cards} | ${r.cyclesPerSecond} | ${r.seconds} | ${r.claimRounds} | ${r.claimP50Ms} | ${r.claimP99Ms} | ${r.redisScriptUsPerCycle} | ${r.clientCpuUsPerCycle} |`,
    ),
    '',
    `Ratio: each side's median cycles/s over its ${input.rounds} run(s) per scenario (rounds alternate which side goes first).`,
    '',
    '| scenario | ours cycles/s (median) | seed cycles/s (median) | ours ÷ seed |',
    '| --- | ---: | ---: | ---: |',
    ...input.ratios.map((r) => `| ${r.scenario} | ${r.ours} | ${r.seed} | ${r.ratio} |`),
    '',
    '## Targets',
    '',
    ...input.verdicts.map((v) => `- ${renderVerdict(v, input.valid)}`),
    '',
    "## The seed's scripts",
    '',
    ...input.seedNotes.map((note) => `- ${note}`),
  ];
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  rejectUnknownFlags(argv, ['--cards', '--rounds', '--out', '--allow-busy', '--help', '-h']);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const totalCards = Math.floor(positive('--cards', flagValue(argv, '--cards') ?? process.env.BENCH_LUA_CARDS) ?? 100_000);
  const rounds = Math.floor(positive('--rounds', flagValue(argv, '--rounds') ?? process.env.BENCH_LUA_ROUNDS) ?? 3);
  const outDir = flagValue(argv, '--out') ?? process.env.BENCH_OUT_DIR ?? RESULTS_DIR;
  const allowBusy = flagSet(argv, '--allow-busy', process.env.BENCH_ALLOW_BUSY);
  const config = loadConfig();
  let scripts: SeedScripts;
  try {
    scripts = readSeedScripts();
  } catch (error) {
    if (!(error instanceof SeedDocumentError)) throw error;
    // Nothing to compare with: say exactly what is missing rather than report ours alone as a ratio.
    process.stderr.write(`Cannot run the seed's scripts: ${error.message}\n`);
    process.exitCode = 4;
    return;
  }
  process.stderr.write('[bench:lua] sampling the machine for 3 s before the run\n');
  const gate = await checkBeforeRun();
  if (gate.reasons.length > 0 && !allowBusy) {
    process.stderr.write(
      `Refusing to benchmark: the machine is busy.\n- ${gate.reasons.join('\n- ')}\nWait for it to be quiet, or pass --allow-busy (the result is then marked invalid).\n`,
    );
    process.exitCode = 3;
    return;
  }
  const monitor = startLoadMonitor(config.DATA_DIR);
  const started = Date.now();
  const run = randomUUID().slice(0, 8);
  // Numeric card ids, as the seed's uint ids, unique to this run: the seed's card keys have no namespace.
  const idBase = `9${String(parseInt(run.slice(0, 6), 16) % 100_000).padStart(5, '0')}`;
  const cardIds = Array.from({ length: totalCards }, (_, i) => `${idBase}${String(i).padStart(7, '0')}`);
  const connections = await openConnections(config.REDIS_URL, CONNECTIONS);
  const admin = connections[0]!;
  const cyclers: Record<Implementation, Cycler[]> = {
    // Keys as deployed: ours with no namespace (production's), the seed's as its scripts spell them.
    // A namespace only ours carried made every one of our keys longer than the seed's card keys.
    ours: connections.map((redis) => ours(redis, '')),
    seed: connections.map((redis) => seed(redis, '', scripts)),
  };
  const cleanup = async (): Promise<void> => {
    await deleteMatching(admin, `${accountKeys('', run).base.slice(0, -2)}*`, 5_000);
    await deleteMatching(admin, `seed:carrier:${run}*`, 5_000);
    await deleteMatching(admin, `${scripts.cardKeyPrefix}${idBase}*`, 5_000);
  };
  try {
    const info = await admin.info('server');
    const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    const plan: { name: string; accounts: number; connections: number }[] = [
      { name: 'one account', accounts: 1, connections: 1 },
      { name: '50 accounts', accounts: 50, connections: CONNECTIONS },
    ];
    const results: ScenarioResult[] = [];
    // Rounds alternate which implementation goes first: on a small shared machine one run's
    // figure moves by ±5 % from run to run, so each side's median over the rounds is compared.
    const orders = Array.from({ length: rounds }, (_, r): Implementation[] => (r % 2 === 0 ? ['ours', 'seed'] : ['seed', 'ours']));
    for (const scenario of plan) {
      for (const implementation of orders.flat()) {
        process.stderr.write(`[bench:lua] ${scenario.name}: ${implementation} (${totalCards} cards)\n`);
        results.push(
          await runScenario(admin, cyclers[implementation].slice(0, scenario.connections), implementation, scenario.name, scenario.accounts, run, cardIds),
        );
        await cleanup();
      }
    }
    const ratios: Ratio[] = plan.map((scenario) => {
      const of = (implementation: Implementation): number =>
        median(results.filter((r) => r.scenario === scenario.name && r.implementation === implementation).map((r) => r.cyclesPerSecond));
      return { scenario: scenario.name, ours: of('ours'), seed: of('seed'), ratio: of('seed') > 0 ? Number((of('ours') / of('seed')).toFixed(3)) : 0 };
    });
    const verdicts = ratios.map((r) =>
      atLeast(`Redis layer, ${r.scenario}: ours ÷ seed cycles/s`, r.ratio, RATIO_TARGET, times, `${r.ours} vs ${r.seed} cycles/s`),
    );
    const load: MachineLoad = { beforeRun: gate, during: monitor.summary(started, Date.now()) };
    const reasons = invalidReasons(gate, load.during);
    const seedNotes = [
      `Read at run time from ${relative(PROJECT_ROOT, scripts.file)} (declares ${scripts.declared.map((name) => `${name}Lua`).join(', ')}); claimLua, acquireExecLua and finishLua run here, with KEYS/ARGV as the seed's carrierqueue/store.go passed them (restated in bench/lua/seedStore.ts).`,
      ...Object.entries(scripts.commentEndsRestored).map(
        ([name, n]) =>
          `The document is flattened onto one line: ${name}Lua's ${n} \`--\` comment(s) would have swallowed the rest of the script, so a line break was put back where each comment's prose ends; the code is unchanged.`,
      ),
      `Not in the seed's scripts, so chosen here: the account key names (constants.RedisCarrierPriorityQueueKey / RedisCarrierQueueKey / RedisCarrierRunningKey → seed:carrier:<id>:prio|queue|running) and the exec key (constants.RedisCardExecKey → ${scripts.cardKeyPrefix}<id>:exec). The due and claim keys (${scripts.cardKeyPrefix}<id>${scripts.dueSuffix}, …${scripts.claimSuffix}) are the ones its claim script hard-codes; the seed's Upsert is Go code (HSET + ZADD), done here the same way.`,
      "The seed's card keys carry no namespace or hash tag (its claim script builds them, so it would not run on Redis Cluster); card ids unique to this run keep them apart from anyone else's on the shared Redis, and both implementations use the same ids.",
      "Ours runs with no key namespace, as deployed (its keys `poll:{c<account>}:…`); account ids carry the run's id instead, as the card ids do for the seed's keys.",
    ];
    const date = new Date(started).toISOString();
    const record = {
      date,
      valid: reasons.length === 0,
      invalidReasons: reasons,
      machineLoad: load,
      redisVersion,
      clientSettings: { library: 'ioredis', enableAutoPipelining: true, connections: CONNECTIONS },
      rounds,
      seed: { file: relative(PROJECT_ROOT, scripts.file), declared: scripts.declared, commentEndsRestored: scripts.commentEndsRestored },
      results,
      ratios,
      verdicts,
      seedNotes,
    };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'lua.json'), `${JSON.stringify(record, null, 2)}\n`);
    const text = markdown({ date, redisVersion, results, ratios, rounds, verdicts, valid: record.valid, reasons, load, seedNotes });
    writeFileSync(join(outDir, 'lua.md'), text);
    process.stdout.write(text);
  } finally {
    monitor.stop();
    await cleanup();
    await Promise.all(connections.map((redis) => redis.quit()));
  }
}

await main();
