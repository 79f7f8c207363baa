/**
 * The gateway simulator in a process of its own (src/simulator/main.ts), for whoever makes it
 * stand in for a carrier beside the workers it measures (`npm start`, the benches, the stack
 * tests): its arrival clock is then its own event loop, not the one of the loaded workers.
 *
 * The child reports its URL over an IPC channel once it listens (port 0 = any free port), and
 * exits when that channel closes: when this process dies, however it dies (SIGKILL included), the
 * simulator goes with it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simulatorControl, type SimulatorControl } from './control.js';
import { defaultLogger, type LogSink } from '../runtime/logger.js';
import { typescriptExecArgv } from '../runtime/typescriptChild.js';

/** A child that has not reported its URL by then is killed (tsx start-up on a loaded machine takes seconds). */
const READY_TIMEOUT_MS = 60_000;
/**
 * The child's scheduling priority (nice -10), where this process may raise it (root): an
 * instrument starved of CPU stamps arrivals late, so calls sent in one second are counted in the
 * next one with that second's own, and the simulator refused them as over the budget (CI,
 * 2026-12-02: "17 calls in one second" at 10 QPS, the test beside three others on two cores).
 * A real carrier's clock does not depend on our load; this one should not either.
 */
const INSTRUMENT_NICE = -10;
/** close(): SIGTERM first, SIGKILL when the child has not exited by then. */
const STOP_GRACE_MS = 5_000;

/** What the child sends once it listens. */
export interface SimulatorListening {
  readonly kind: 'listening';
  readonly url: string;
}

export function isSimulatorListening(message: unknown): message is SimulatorListening {
  return (
    typeof message === 'object' && message !== null && 'kind' in message && message.kind === 'listening' && 'url' in message && typeof message.url === 'string'
  );
}

export interface SimulatorProcessOptions {
  readonly host?: string;
  /** 0 = any free port (the default). */
  readonly port?: number;
  /** Seed of every random choice (`--seed`); random when absent. */
  readonly seed?: number;
  /** The child's LOG_LEVEL (default: this process' environment). */
  readonly logLevel?: string;
  /** Where this process reports the child's unexpected exit (default: {@link defaultLogger}). */
  readonly logger?: Pick<LogSink, 'error'>;
}

export interface SimulatorProcess extends SimulatorControl {
  readonly pid: number;
  /** Stops the child and resolves once it has exited. */
  close(): Promise<void>;
}

/** The entry beside this module: main.ts from sources, main.js in the compiled build (dist/). */
function entry(): { readonly script: string; readonly execArgv: string[] } {
  const self = fileURLToPath(import.meta.url);
  const extension = extname(self);
  const script = join(dirname(self), `main${extension}`);
  if (extension !== '.ts') return { script, execArgv: [] };
  // TypeScript sources: loaded the way this process loads them.
  return { script, execArgv: typescriptExecArgv() };
}

export async function startSimulatorProcess(options: SimulatorProcessOptions = {}): Promise<SimulatorProcess> {
  const { script, execArgv } = entry();
  const args = [`--host=${options.host ?? '127.0.0.1'}`, `--port=${options.port ?? 0}`, ...(options.seed === undefined ? [] : [`--seed=${options.seed}`])];
  const child = fork(script, args, {
    execArgv,
    env: { ...process.env, ...(options.logLevel === undefined ? {} : { LOG_LEVEL: options.logLevel }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // Its own process group: a Ctrl-C at the terminal reaches the parent only, which stops the
    // simulator after its workers (their calls in flight still get answers).
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  raisePriority(child.pid);
  const url = await listeningUrl(child);
  // Neither the channel nor the child keeps this process alive: its exit closes the channel, and
  // the child exits on that.
  child.unref();
  child.channel?.unref();
  let closing = false;
  child.once('exit', (code, signal) => {
    if (!closing)
      (options.logger ?? defaultLogger()).error(
        { pid: child.pid, code, signal },
        `simulator process ${child.pid} exited unexpectedly (${signal ?? `code ${code}`})`,
      );
  });
  return {
    ...simulatorControl(url),
    pid: child.pid ?? 0,
    async close() {
      closing = true;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The instrument ahead of the processes it measures; without the right to (not root), as it is.
 * Linux with autogroups (the default) shares the CPU between sessions before it looks at a
 * process's nice value, and the child leads a session of its own (`detached`): so its session's
 * weight is raised too, or a busy session beside it still delays it (measured: whole batches of
 * calls read 25–50 ms after they were sent, with the test files and two busy loops on two cores).
 */
function raisePriority(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    setPriority(pid, INSTRUMENT_NICE);
  } catch {
    // EACCES: an unprivileged user may only lower a priority. The measurements stay valid on a quiet machine.
  }
  try {
    const group = (path: string): string => readFileSync(path, 'utf8').split(' ')[0] ?? '';
    // Only the child's own session: never raise the one it shares with its parent.
    if (group(`/proc/${pid}/autogroup`) !== group('/proc/self/autogroup')) writeFileSync(`/proc/${pid}/autogroup`, String(INSTRUMENT_NICE));
  } catch {
    // Not Linux, autogroups off, or not allowed: the process's own nice value is what there is.
  }
}

/** Resolves with the URL the child reports; rejects when it exits or stays silent first. */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      child.off('error', onError);
    };
    const onMessage = (message: unknown): void => {
      if (!isSimulatorListening(message)) return;
      done();
      resolve(message.url);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      done();
      reject(new Error(`the simulator process exited before it listened (${signal ?? `code ${code}`}; its output is above)`));
    };
    const onError = (error: Error): void => {
      done();
      child.kill('SIGKILL');
      reject(error);
    };
    const timer = setTimeout(() => {
      done();
      child.kill('SIGKILL');
      reject(new Error(`the simulator process did not listen within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}
