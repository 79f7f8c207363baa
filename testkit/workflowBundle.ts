/**
 * One workflow bundle for many test processes. `node --test` runs every test file in a process of
 * its own, and each used to bundle the workflows with webpack (seconds of CPU) before its first
 * worker: with some fifty files that start workers, a few minutes of the two cores per run. Here
 * the first process to need a bundle writes it to a cache file named by a hash of everything it
 * can contain; the others load that file (`{ codePath }`).
 *
 * The key: the bundle options, this checkout's path (the bundle's inline source map names
 * absolute paths) and the content of every file the workflow code can import — all of `src/` and
 * the test fixtures, plus the lock file (the SDK's version). An edit anywhere there makes a new
 * bundle; the cache never serves stale workflow code.
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode, type WorkflowBundlePath } from '@temporalio/worker';
import { PROJECT_ROOT } from '../devstack/paths.js';
import { WORKFLOWS_PATH } from '../src/workers/workflowBundle.js';

const CACHE_DIR = join(tmpdir(), 'card-poller-test-bundles');
/** Bundles not used for this long are removed when a new one is written (each is ~2 MB). */
const KEEP_UNUSED_MS = 24 * 3600_000;
/** What the workflow code can import: its sources, the test fixtures' workflows and interceptors. */
const SOURCE_DIRS = ['src', join('test', 'fixtures')];

export interface TestBundleOptions {
  readonly workflowsPath: string;
  readonly workflowInterceptorModules?: readonly string[];
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => (entry.isDirectory() ? filesUnder(join(dir, entry.name)) : entry.isFile() ? [join(dir, entry.name)] : []));
}

function bundleKey(options: TestBundleOptions): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify({ root: PROJECT_ROOT, ...options }));
  for (const file of [...SOURCE_DIRS.flatMap((dir) => filesUnder(join(PROJECT_ROOT, dir))), join(PROJECT_ROOT, 'package-lock.json')]) {
    hash.update(file);
    hash.update(readFileSync(file));
  }
  return hash.digest('hex').slice(0, 24);
}

const noop = (): void => undefined;
const quiet = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

function pruneOld(): void {
  for (const name of readdirSync(CACHE_DIR)) {
    const path = join(CACHE_DIR, name);
    try {
      if (Date.now() - statSync(path).atimeMs > KEEP_UNUSED_MS) rmSync(path, { force: true });
    } catch {
      // Removed by another process meanwhile.
    }
  }
}

/** How long a process waits for another one's bundling before it bundles itself (a crashed builder). */
const BUILDER_WAIT_MS = 120_000;

/**
 * True when this process is the one to build `codePath`: it created the lock file. The others wait
 * for the bundle instead of building the same one at once — at the start of a fresh clone's run,
 * each of the first few test processes spent seconds of CPU on it.
 */
function takeBuilderLock(lockPath: string): boolean {
  try {
    // A lock older than any bundling is a builder that died (killed test run): taken over.
    if (existsSync(lockPath) && Date.now() - statSync(lockPath).mtimeMs > BUILDER_WAIT_MS) rmSync(lockPath, { force: true });
    closeSync(openSync(lockPath, 'wx'));
    return true;
  } catch {
    return false;
  }
}

async function waitForBundle(codePath: string, lockPath: string): Promise<boolean> {
  const until = Date.now() + BUILDER_WAIT_MS;
  while (Date.now() < until) {
    if (existsSync(codePath)) return true;
    // The builder gave up without a bundle (its lock is gone): build here.
    if (!existsSync(lockPath)) return false;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return false;
}

const inProcess = new Map<string, Promise<WorkflowBundlePath>>();

/** The bundle of `options`: from the cache when an equal one was built, else built now and cached. */
export function testWorkflowBundle(options: TestBundleOptions): Promise<WorkflowBundlePath> {
  const key = bundleKey(options);
  let bundle = inProcess.get(key);
  if (!bundle) {
    bundle = (async () => {
      const codePath = join(CACHE_DIR, `${key}.js`);
      if (existsSync(codePath)) return { codePath };
      mkdirSync(CACHE_DIR, { recursive: true });
      const lockPath = `${codePath}.lock`;
      const builder = takeBuilderLock(lockPath);
      if (!builder && (await waitForBundle(codePath, lockPath))) return { codePath };
      try {
        await buildInto(codePath, options);
      } finally {
        if (builder) rmSync(lockPath, { force: true });
      }
      return { codePath };
    })();
    inProcess.set(key, bundle);
  }
  return bundle;
}

async function buildInto(codePath: string, options: TestBundleOptions): Promise<void> {
  const { code } = await bundleWorkflowCode({ ...options, workflowInterceptorModules: [...(options.workflowInterceptorModules ?? [])], logger: quiet });
  // Written whole, then renamed: a process reading the path never sees half a bundle (two
  // processes building the same bundle at once write the same content).
  const partial = `${codePath}.${process.pid}.tmp`;
  writeFileSync(partial, code);
  renameSync(partial, codePath);
  pruneOld();
}

/**
 * The environment that makes a worker process spawned from the sources load this shared bundle
 * (WORKFLOW_BUNDLE_PATH) instead of bundling the workflows itself: seconds of CPU per process, on
 * the path of every test that starts or restarts one.
 */
export async function sharedBundleEnv(): Promise<{ WORKFLOW_BUNDLE_PATH: string }> {
  const { codePath } = await testWorkflowBundle({ workflowsPath: WORKFLOWS_PATH });
  return { WORKFLOW_BUNDLE_PATH: codePath };
}
