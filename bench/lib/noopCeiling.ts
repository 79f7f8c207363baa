/**
 * The dev server's ceiling: workflows with no activity (bench/workflows/noop.ts) started with the
 * client as fast as the server completes them, with a bounded number outstanding so the figure is
 * what the server sustains, not a backlog. Completions are counted in the worker through a sink
 * (no extra history, no extra RPC); server CPU per workflow comes from the Temporal pid.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker, type InjectedSinks } from '@temporalio/worker';
import type { Config } from '../../src/config/index.js';
import type { CeilingSinks } from '../workflows/noop.js';
import { installWorkerRuntime } from './stack.js';
import { cpuShares, cpuTimes, servicePidsFor, type CpuTimes } from './processes.js';
import { historyShape, type HistoryShape } from './history.js';
import { round, sleep } from './stats.js';

const NOOP_PATH = fileURLToPath(new URL('../workflows/noop.ts', import.meta.url));
/** Concurrent start calls (as the client start mode uses for cards). */
const START_CONCURRENCY = 32;
/** Started but not yet completed: enough to keep the worker's pollers busy, no unbounded backlog. */
const MAX_OUTSTANDING = 200;
const HISTORY_SAMPLE = 10;
const DRAIN_MS = 15_000;

export interface NoopCeiling {
  readonly date: string;
  readonly windowSeconds: number;
  readonly workflows: number;
  readonly workflowsPerSecond: number;
  readonly temporalCpuMsPerWorkflow: number;
  readonly benchCpuMsPerWorkflow: number;
  readonly cpuShares: CpuTimes;
  readonly history: HistoryShape;
  readonly settings: { readonly startConcurrency: number; readonly maxOutstanding: number; readonly workerMaxWorkflowTasks: number };
}

const quiet = (): void => undefined;

export async function measureNoopCeiling(
  config: Config,
  seconds: { warmupSec: number; durationSec: number },
  log: (line: string) => void,
): Promise<NoopCeiling> {
  const id = `bench-ceiling-${randomUUID().slice(0, 8)}`;
  installWorkerRuntime();
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: NOOP_PATH,
    logger: { trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet, log: quiet },
  });
  let started = 0;
  let completed = 0;
  let waiters: (() => void)[] = [];
  const sinks: InjectedSinks<CeilingSinks> = {
    ceiling: {
      completed: {
        fn: () => {
          completed += 1;
          const wake = waiters;
          waiters = [];
          for (const resolve of wake) resolve();
        },
        callDuringReplay: false,
      },
    },
  };
  const workerMaxWorkflowTasks = Math.min(config.WORKER_CARD_MAX_WORKFLOWS, 1000);
  const nativeConnection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: id,
    workflowBundle,
    sinks,
    maxConcurrentWorkflowTaskExecutions: workerMaxWorkflowTasks,
    shutdownGraceTime: 2000,
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const ids: string[] = [];
  let stop = false;
  const starter = async (): Promise<void> => {
    while (!stop) {
      if (started - completed >= MAX_OUTSTANDING) {
        await new Promise<void>((resolve) => waiters.push(resolve));
        continue;
      }
      const workflowId = `${id}-${started}`;
      started += 1;
      ids.push(workflowId);
      await client.workflow.start('benchNoop', { workflowId, taskQueue: id, args: [] });
    }
  };
  try {
    const starters = Array.from({ length: START_CONCURRENCY }, () => starter());
    log(`no-activity workflows: warm-up ${seconds.warmupSec} s`);
    await sleep(seconds.warmupSec * 1000);
    const pids = servicePidsFor(config);
    const cpuBefore = cpuTimes(pids);
    const doneBefore = completed;
    const from = Date.now();
    log(`no-activity workflows: measuring ${seconds.durationSec} s`);
    await sleep(seconds.durationSec * 1000);
    const windowMs = Date.now() - from;
    const workflows = completed - doneBefore;
    const cpu = cpuShares(cpuBefore, cpuTimes(pids), windowMs);
    const firstInWindow = doneBefore;
    stop = true;
    for (const resolve of waiters.splice(0)) resolve();
    await Promise.all(starters);
    const drainUntil = Date.now() + DRAIN_MS;
    while (completed < started && Date.now() < drainUntil) await sleep(100);
    // Ids started around the window's start have completed by now: their histories are whole.
    const sample = ids.slice(firstInWindow, firstInWindow + HISTORY_SAMPLE).map((workflowId) => ({ workflowId }));
    const history = await historyShape(client, sample);
    const per = (share: number): number => (workflows > 0 ? round((share * windowMs) / workflows, 2) : 0);
    return {
      date: new Date(from).toISOString(),
      windowSeconds: round(windowMs / 1000),
      workflows,
      workflowsPerSecond: round(workflows / (windowMs / 1000), 1),
      temporalCpuMsPerWorkflow: per(cpu.temporal),
      benchCpuMsPerWorkflow: per(cpu.bench),
      cpuShares: cpu,
      history,
      settings: { startConcurrency: START_CONCURRENCY, maxOutstanding: MAX_OUTSTANDING, workerMaxWorkflowTasks },
    };
  } finally {
    stop = true;
    for (const resolve of waiters.splice(0)) resolve();
    if (completed < started) {
      for await (const execution of client.workflow.list({ query: `WorkflowId STARTS_WITH "${id}" AND ExecutionStatus = "Running"` })) {
        await client.workflow
          .getHandle(execution.workflowId, execution.runId)
          .terminate('bench finished')
          .catch(() => undefined);
      }
    }
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
    await nativeConnection.close();
    await connection.close();
  }
}
