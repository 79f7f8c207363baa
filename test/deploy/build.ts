/** Runs `scripts/build.ts` into a folder of its own under test-results/ (inside the project, so node_modules resolve). */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './entries.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

export const ROOT_DIR = fileURLToPath(ROOT);

export interface Build {
  readonly dir: string;
  /** `dist/<path>` of the container files → the same file in this build. */
  resolve(distPath: string): string;
  remove(): void;
}

export function buildInto(label: string): Build {
  const dir = join(ROOT_DIR, 'test-results', `build-${label}-${randomUUID().slice(0, 8)}`);
  const result = spawnSync(process.execPath, [...typescriptExecArgv(), 'scripts/build.ts', '--out', dir], { cwd: ROOT_DIR, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`build failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return {
    dir,
    resolve: (distPath) => join(dir, distPath.replace(/^dist\//, '')),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface EntryProcess {
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A compiled entry run with plain `node`, as in the image. */
export function runEntry(script: string, env: Record<string, string>): EntryProcess {
  const child = spawn(process.execPath, [script], { cwd: ROOT_DIR, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}
