/**
 * Where a worker process gets its workflow code. Compiled (`npm run build`, `node dist/…`): the
 * prebuilt `dist/workflow-bundle.js`, so a production worker starts without bundling. From the
 * TypeScript sources (tsx): bundled once at start from `src/workflows` and shared by the process'
 * workers, so a code change is picked up without a build. WORKFLOW_BUNDLE_PATH names a bundle file
 * to load instead in either case (the tests give their processes the one bundle they share).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundleOption, type WorkflowBundleWithSourceMap } from '@temporalio/worker';

/** True when this module runs as compiled JavaScript (dist/), false under tsx. */
const COMPILED = import.meta.url.endsWith('.js');

export const WORKFLOWS_PATH = fileURLToPath(new URL(`../workflows/index.${COMPILED ? 'js' : 'ts'}`, import.meta.url));

/** `dist/workflow-bundle.js`, next to `dist/src/` (see scripts/build.ts). */
export const PREBUILT_BUNDLE_PATH = fileURLToPath(new URL('../../workflow-bundle.js', import.meta.url));

const quiet = (): void => undefined;

export function bundleWorkflows(workflowsPath = WORKFLOWS_PATH): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath, logger: { trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet, log: quiet } });
}

export interface ProcessBundle {
  readonly bundle: WorkflowBundleOption;
  /** Short content hash of the workflow code: the default build id of a versioned deployment. */
  readonly codeHash: string;
  readonly source: 'prebuilt' | 'bundled';
}

export function workflowCodeHash(code: string): string {
  return createHash('sha256').update(code).digest('hex').slice(0, 12);
}

function prebuilt(codePath: string): ProcessBundle {
  return { bundle: { codePath }, codeHash: workflowCodeHash(readFileSync(codePath, 'utf8')), source: 'prebuilt' };
}

/** `configuredPath` (WORKFLOW_BUNDLE_PATH) when set, else the build's bundle when compiled, else a bundling of the sources. */
export async function loadProcessBundle(configuredPath = ''): Promise<ProcessBundle> {
  if (configuredPath !== '') return prebuilt(configuredPath);
  if (COMPILED && existsSync(PREBUILT_BUNDLE_PATH)) return prebuilt(PREBUILT_BUNDLE_PATH);
  const bundle = await bundleWorkflows();
  return { bundle, codeHash: workflowCodeHash(bundle.code), source: 'bundled' };
}
