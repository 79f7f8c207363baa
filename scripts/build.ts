/**
 * `npm run build`: compiled JavaScript in `dist/` (tsc with tsconfig.build.json: `src/` and the
 * migrate script, under `dist/src/`, `dist/scripts/`), the Lua scripts and migrations beside them
 * (`dist/lua/`, `dist/migrations/`, found relative to the compiled loaders), and the prebuilt
 * workflow bundle `dist/workflow-bundle.js` that compiled workers load instead of bundling at start.
 *
 * `--out DIR` builds elsewhere (tests); DIR must lie inside the project so that the compiled
 * modules find `node_modules/`.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflows, workflowCodeHash } from '../src/workers/workflowBundle.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outArg = process.argv[process.argv.indexOf('--out') + 1];
const DIST = process.argv.includes('--out') && outArg ? resolve(outArg) : join(ROOT, 'dist');

function step<T>(what: string, run: () => T): T {
  const started = Date.now();
  const result = run();
  process.stdout.write(`[build] ${what} (${Date.now() - started} ms)\n`);
  return result;
}

const began = Date.now();
step('cleaned dist/', () => rmSync(DIST, { recursive: true, force: true }));
step('compiled TypeScript', () => {
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', DIST], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (tsc.status !== 0) {
    process.stderr.write('[build] tsc failed\n');
    process.exit(tsc.status ?? 1);
  }
});
step('copied lua/ and migrations/', () => {
  cpSync(join(ROOT, 'lua'), join(DIST, 'lua'), { recursive: true });
  cpSync(join(ROOT, 'migrations'), join(DIST, 'migrations'), { recursive: true });
});
const started = Date.now();
const bundle = await bundleWorkflows(join(ROOT, 'src', 'workflows', 'index.ts'));
mkdirSync(DIST, { recursive: true });
writeFileSync(join(DIST, 'workflow-bundle.js'), bundle.code);
process.stdout.write(
  `[build] bundled workflows: ${join(DIST, 'workflow-bundle.js')}, ${Math.round(bundle.code.length / 1024)} KiB, ` +
    `build id wf-${workflowCodeHash(bundle.code)} (${Date.now() - started} ms)\n`,
);
process.stdout.write(`[build] done in ${Date.now() - began} ms\n`);
