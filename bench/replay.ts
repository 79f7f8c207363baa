/**
 * `npm run bench:replay`: how long the largest history the loops can produce takes to replay.
 *
 * A run that must be replayed (its worker restarted, its cache entry evicted, a task refused)
 * replays its whole history inside one workflow task, so that time must stay far inside the
 * workflow task timeout (10 s) even on a starved CPU. This drives a carrierScheduler in child
 * start mode under load until its first run continues as new (the largest history its rollover
 * rules allow: the threshold plus its drain), and a pollingControl with a stream of reconcile
 * signals until it does too; then it replays each closed run, on a quiet machine and with one
 * busy-looping process per core beside it. Figures go to bench/results/replay.{json,md}.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { loadConfigOrExit } from '../src/config/index.js';
import { bundleWorkflows } from '../src/workers/workflowBundle.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../src/workflow-safe/workflowIds.js';
import { reconcileSignal } from '../src/workflows/messages.js';
import { createBenchStack, installWorkerRuntime } from './lib/stack.js';
import { seedAccount } from './lib/seed.js';
import { ensureServices } from './lib/environment.js';
import { RESULTS_DIR } from './lib/report.js';

const HELP = `npm run bench:replay [-- --cards N] [--interval-sec S] [--rounds R]
  --cards N          cards of the scheduler's account (default 300)
  --interval-sec S   their polling interval (default 10: 30 checks/s with 300 cards)
  --rounds R         replays of each history per condition (default 3)`;

/** Longest wait for a loop's first run to continue as new. */
const ROLLOVER_WAIT_MS = 15 * 60_000;
const log = (line: string): void => void process.stderr.write(`[bench:replay ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Options {
  readonly cards: number;
  readonly intervalSec: number;
  readonly rounds: number;
}

function parseOptions(argv: readonly string[]): Options | 'help' {
  const values = { cards: 300, intervalSec: 10, rounds: 3 };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    if (flag === '--help' || flag === '-h') return 'help';
    const key = { '--cards': 'cards', '--interval-sec': 'intervalSec', '--rounds': 'rounds' }[flag ?? ''] as keyof typeof values | undefined;
    const value = Number(argv[i + 1]);
    if (key === undefined) throw new Error(`unknown option ${flag}`);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} must be a positive integer, got ${argv[i + 1]}`);
    values[key] = value;
    i += 1;
  }
  return values;
}

interface ClosedRun {
  readonly workflowId: string;
  readonly runId: string;
  readonly history: temporal.api.history.v1.IHistory;
  readonly events: number;
  readonly bytes: number;
}

/** Waits for the workflow's current run to be replaced (continue-as-new), then fetches the closed run. */
async function firstClosedRun(client: Client, workflowId: string, nudge?: () => Promise<void>): Promise<ClosedRun> {
  const handle = client.workflow.getHandle(workflowId);
  const began = Date.now();
  let first: string | undefined;
  for (;;) {
    const description = await handle.describe().catch(() => undefined);
    if (description && first === undefined) first = description.runId;
    if (description && first !== undefined && description.runId !== first) break;
    if (Date.now() - began > ROLLOVER_WAIT_MS) throw new Error(`${workflowId} did not continue as new within ${ROLLOVER_WAIT_MS / 60_000} minutes`);
    if (nudge) await nudge();
    else await sleep(1000);
  }
  const closed = client.workflow.getHandle(workflowId, first);
  const history = await closed.fetchHistory();
  const description = await closed.describe();
  return {
    workflowId,
    runId: first ?? '',
    history,
    events: history.events?.length ?? 0,
    bytes: Number(description.raw.workflowExecutionInfo?.historySizeBytes ?? 0),
  };
}

/** One busy-looping process per core: the CPU a replay gets when the machine is saturated. */
function startHogs(): ChildProcess[] {
  return Array.from({ length: availableParallelism() }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
}

async function replayTimes(run: ClosedRun, rounds: number, workflowBundle: Awaited<ReturnType<typeof bundleWorkflows>>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < rounds; i += 1) {
    const began = performance.now();
    await Worker.runReplayHistory({ workflowBundle }, run.history, run.workflowId);
    times.push(Math.round(performance.now() - began));
  }
  return times;
}

async function main(): Promise<void> {
  let options: Options | 'help';
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}\n`);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const config = loadConfigOrExit();
  await ensureServices(config, log);
  installWorkerRuntime();
  const stack = await createBenchStack(config, 'replay', { cardStartMode: 'child' });
  const runs: ClosedRun[] = [];
  try {
    const account = await seedAccount(stack, {
      name: 'replay1',
      qps: { main: 200 },
      typeGroups: { card_status: 'main' },
      cards: options.cards,
      intervalsSec: { card_status: options.intervalSec },
      latencyMs: { p50: 20, p99: 80 },
    });
    await stack.startOrchestration();
    log(`scheduler under ${(options.cards / options.intervalSec).toFixed(0)} checks/s in child start mode: waiting for its first continue-as-new`);
    runs.push(await firstClosedRun(stack.client, schedulerWorkflowId(account.carrier.id, stack.ref.workflowIdPrefix)));
    log('pollingControl under a stream of reconcile signals: waiting for its first continue-as-new');
    const control = stack.client.workflow.getHandle(pollingControlWorkflowId(stack.ref.workflowIdPrefix));
    runs.push(
      await firstClosedRun(stack.client, control.workflowId, async () => {
        await control.signal(reconcileSignal).catch(() => undefined);
        await sleep(50);
      }),
    );
  } finally {
    await stack.close();
  }

  const workflowBundle = await bundleWorkflows();
  const rows: { workflowId: string; events: number; bytes: number; quietMs: number[]; hoggedMs: number[] }[] = [];
  for (const run of runs) {
    log(`replaying ${run.workflowId} (${run.events} events, ${run.bytes} bytes)`);
    const quietMs = await replayTimes(run, options.rounds, workflowBundle);
    const hogs = startHogs();
    let hoggedMs: number[];
    try {
      hoggedMs = await replayTimes(run, options.rounds, workflowBundle);
    } finally {
      for (const hog of hogs) hog.kill('SIGKILL');
    }
    rows.push({ workflowId: run.workflowId.replace(stack.ref.workflowIdPrefix, ''), events: run.events, bytes: run.bytes, quietMs, hoggedMs });
  }
  const max = (values: readonly number[]): number => Math.max(...values);
  const lines = [
    '# Replay time of the largest loop histories',
    '',
    `Generated by \`npm run bench:replay\` at ${new Date().toISOString()}; ${availableParallelism()} cores; ` +
      `${options.rounds} replays per condition; "hogged" = one busy-looping process per core beside the replay. Workflow task timeout: 10 000 ms.`,
    '',
    '| workflow | events | history bytes | replay ms, quiet (max) | replay ms, hogged (max) | all quiet | all hogged |',
    '| --- | ---: | ---: | ---: | ---: | --- | --- |',
    ...rows.map(
      (r) => `| ${r.workflowId} | ${r.events} | ${r.bytes} | ${max(r.quietMs)} | ${max(r.hoggedMs)} | ${r.quietMs.join(', ')} | ${r.hoggedMs.join(', ')} |`,
    ),
    '',
  ];
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(join(RESULTS_DIR, 'replay.json'), `${JSON.stringify({ at: new Date().toISOString(), options, rows }, null, 2)}\n`);
  writeFileSync(join(RESULTS_DIR, 'replay.md'), `${lines.join('\n')}`);
  process.stdout.write(`${lines.join('\n')}`);
}

await main();
