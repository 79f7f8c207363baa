/** Small helpers to start background services, probe them and wait for them. */
import { spawn, execFile, type SpawnOptions } from 'node:child_process';
import { openSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { promisify } from 'node:util';

export const execFileAsync = promisify(execFile);

/** True when something accepts TCP connections on host:port. */
export function isTcpOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = connect({ host, port });
    const done = (open: boolean): void => {
      socket.destroy();
      resolvePromise(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Starts a long-running process detached from ours, output to a log file, pid to a file. */
export function spawnDetached(command: string, args: readonly string[], logFile: string, pidFile: string, options: SpawnOptions = {}): number {
  const out = openSync(logFile, 'a');
  const child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', out, out] });
  if (child.pid === undefined) throw new Error(`Could not start ${command}`);
  child.unref();
  writeFileSync(pidFile, String(child.pid));
  return child.pid;
}

export function readPid(pidFile: string): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').trim(), 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Sends SIGTERM to the process in pidFile and waits for it to exit (SIGKILL after the grace time). */
export async function stopPidFile(pidFile: string, graceMs = 15_000): Promise<boolean> {
  const pid = readPid(pidFile);
  if (pid === undefined || !isAlive(pid)) {
    rmSync(pidFile, { force: true });
    return false;
  }
  process.kill(pid, 'SIGTERM');
  const started = Date.now();
  while (isAlive(pid) && Date.now() - started < graceMs) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(pidFile, { force: true });
  return true;
}
