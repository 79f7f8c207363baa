/**
 * `npx tsx bench/cluster-redis.ts [--cards N] [--accounts A] [--out DIR] [--allow-busy]`: only the
 * claim-round half of `npm run bench -- --scenario cluster` (bench/lib/claimRounds.ts), with its
 * sizes adjustable — for trying other card or account counts without the Temporal half. The
 * scenario is the figure to quote. Writes <out>/cluster-redis.json and .md (default
 * bench/results). Refused on a busy machine unless --allow-busy (then marked invalid).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfigOrExit } from '../src/config/index.js';
import { LOCAL_CLUSTER_NODES } from '../devstack/redisCluster.js';
import { flagSet, flagValue, positive, rejectUnknownFlags } from './lib/options.js';
import { RESULTS_DIR, renderTable, validityLines, type MachineLoad } from './lib/report.js';
import { checkBeforeRun, driveProcesses, invalidReasons, startLoadMonitor } from './lib/machineLoad.js';
import {
  claimExplain,
  claimTables,
  compareClaimRounds,
  DEFAULT_CLAIM_ACCOUNTS,
  DEFAULT_CLAIM_CARDS,
  ensureRedisCluster,
  redisClusterPids,
} from './lib/claimRounds.js';

const HELP = `usage: npx tsx bench/cluster-redis.ts [--cards N] [--accounts A] [--out DIR] [--allow-busy]
  --cards N     due cards per claim scenario (default ${DEFAULT_CLAIM_CARDS})
  --accounts A  accounts of the concurrent claim scenario (default ${DEFAULT_CLAIM_ACCOUNTS})
  --out DIR     results folder (default bench/results)
  --allow-busy  run on a busy machine anyway (result marked invalid)
Single Redis: REDIS_URL. Cluster: REDIS_CLUSTER_NODES, else ${LOCAL_CLUSTER_NODES} (started when down).
The full comparison (this plus the Temporal dev server vs cluster): npm run bench -- --scenario cluster`;

const log = (line: string): void => void process.stderr.write(`[bench:cluster-redis] ${line}\n`);

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  rejectUnknownFlags(argv, ['--cards', '--accounts', '--out', '--allow-busy', '--help', '-h']);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const cards = Math.floor(positive('--cards', flagValue(argv, '--cards')) ?? DEFAULT_CLAIM_CARDS);
  const accounts = Math.floor(positive('--accounts', flagValue(argv, '--accounts')) ?? DEFAULT_CLAIM_ACCOUNTS);
  const outDir = flagValue(argv, '--out') ?? RESULTS_DIR;
  const allowBusy = flagSet(argv, '--allow-busy', process.env.BENCH_ALLOW_BUSY);
  const config = loadConfigOrExit();
  log('sampling the machine for 3 s before the run');
  const gate = await checkBeforeRun();
  if (gate.reasons.length > 0 && !allowBusy) {
    process.stderr.write(
      `Refusing to benchmark: the machine is busy.\n- ${gate.reasons.join('\n- ')}\nWait for it to be quiet, or pass ` +
        `--allow-busy (the result is then marked invalid).\n`,
    );
    process.exitCode = 3;
    return;
  }
  await ensureRedisCluster(config, log);
  const monitor = startLoadMonitor(config.DATA_DIR);
  const undrive = driveProcesses(() => redisClusterPids(config));
  const started = Date.now();
  try {
    const comparison = await compareClaimRounds(config, { cards, accounts }, log);
    const load: MachineLoad = { beforeRun: gate, during: monitor.summary(started, Date.now()) };
    const reasons = invalidReasons(gate, load.during);
    const date = new Date(started).toISOString();
    const record = { date, valid: reasons.length === 0, invalidReasons: reasons, machineLoad: load, ...comparison };
    const lines = [
      `# Claim rounds on Redis Cluster vs single Redis (${date}, Node ${process.version})`,
      '',
      ...validityLines(record.valid, reasons, load),
      '',
      claimExplain(comparison),
      '',
    ];
    for (const table of claimTables(comparison)) lines.push(...renderTable(table), '');
    const text = `${lines.join('\n')}`;
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'cluster-redis.json'), `${JSON.stringify(record, null, 2)}\n`);
    writeFileSync(join(outDir, 'cluster-redis.md'), text);
    process.stdout.write(text);
  } finally {
    undrive();
    monitor.stop();
  }
}

await main();
