/**
 * Test access to the real Temporal dev server started by `npm run services:up`. Tests never let
 * the SDK download a server: they connect to the running one. Workflow bundles are built once for
 * all test processes (testkit/workflowBundle.ts) and reused by every worker.
 */
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowBundlePath } from '@temporalio/worker';
import { loadConfig } from '../src/config/index.js';
import { testWorkflowBundle } from './workflowBundle.js';

export async function connectTestEnv(): Promise<TestWorkflowEnvironment> {
  const config = loadConfig();
  return TestWorkflowEnvironment.createFromExistingServer({
    address: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
  });
}

/** The workflows of `workflowsPath`, bundled once for all test processes. */
export function bundleOnce(workflowsPath: string): Promise<WorkflowBundlePath> {
  return testWorkflowBundle({ workflowsPath });
}

/** A task queue / workflow id unique to one test, readable in the Web UI. */
export function uniqueName(label: string): string {
  return `${label.replace(/[^a-zA-Z0-9-]/g, '-')}-${randomUUID().slice(0, 8)}`;
}
