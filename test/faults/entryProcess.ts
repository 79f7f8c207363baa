/**
 * One of the project's entry points (`src/…/main.ts`, `demo/start.ts`, …) run as a process of
 * its own under tsx, with its output captured: fault tests kill the services under such processes
 * and check that they are still alive afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../testkit/seed.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface EntryProcess {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
  /** The signal name or exit code once the process ended. */
  readonly exited: Promise<string>;
}

export function spawnEntryProcess(name: string, script: string, env: NodeJS.ProcessEnv): EntryProcess {
  const child = spawn(process.execPath, [...typescriptExecArgv(), script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
  // 'exit' can come before the last of the output ('data' after it): the process's final line (npm
  // start's "stopped …") was missing once. Settled when both streams ended too, or 5 s after the
  // exit should something the process started still hold them open.
  const ended = (stream: NodeJS.ReadableStream | null): Promise<void> =>
    stream === null ? Promise.resolve() : new Promise((resolve) => stream.once('end', () => resolve()));
  const outputEnded = Promise.all([ended(child.stdout), ended(child.stderr)]);
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? String(code)))).then(async (how) => {
    await Promise.race([outputEnded, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    return how;
  });
  return { name, child, output: () => output, exited };
}

export const isRunning = (entry: EntryProcess): boolean => entry.child.exitCode === null && entry.child.signalCode === null;

/** Waits until the process printed `line`; fails at once, with its output, when it exits first. */
export async function waitUntilPrinted(entry: EntryProcess, line: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `the ${entry.name} process to print "${line}"`,
    async () => {
      if (!isRunning(entry)) throw new Error(`${entry.name} exited early:\n${entry.output()}`);
      return entry.output().includes(line);
    },
    timeoutMs,
    100,
  );
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
