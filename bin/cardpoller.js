#!/usr/bin/env node
// Runs the CLI: from the TypeScript sources through tsx in a development checkout, from the
// compiled build (`npm run build`, dist/) where the sources or tsx are absent (the image).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const compiled = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

function hasTsx() {
  try {
    createRequire(import.meta.url).resolve('tsx');
    return true;
  } catch {
    return false;
  }
}

const args = existsSync(source) && hasTsx() ? ['--import', 'tsx', source] : [compiled];
const result = spawnSync(process.execPath, [...args, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
