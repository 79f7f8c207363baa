/**
 * Test access to the real Temporal dev server started by `npm run services:up`. Tests never let
 * the SDK download a server: they connect to the running one. Workflow bundles are built once per
 * test file and reused by every worker in it.
 */
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { loadConfig } from '../src/config/index.js';

export async function connectTestEnv(): Promise<TestWorkflowEnvironment> {
  const config = loadConfig();
  return TestWorkflowEnvironment.createFromExistingServer({
    address: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
  });
}

const bundles = new Map<string, Promise<WorkflowBundleWithSourceMap>>();

export function bundleOnce(workflowsPath: string): Promise<WorkflowBundleWithSourceMap> {
  let bundle = bundles.get(workflowsPath);
  if (!bundle) {
    bundle = bundleWorkflowCode({ workflowsPath, logger: quietBundlerLogger });
    bundles.set(workflowsPath, bundle);
  }
  return bundle;
}

const noop = (): void => undefined;
const quietBundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

/** A task queue / workflow id unique to one test, readable in the Web UI. */
export function uniqueName(label: string): string {
  return `${label.replace(/[^a-zA-Z0-9-]/g, '-')}-${randomUUID().slice(0, 8)}`;
}
