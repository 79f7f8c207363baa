/**
 * How the long-running loops (pollingControl, carrierScheduler) move to new workflow code under
 * worker versioning. Each run is pinned to the worker-deployment version it started on, so a change
 * in command order never meets a running history; at continue-as-new the next run starts on the
 * current version instead of inheriting the pinned one (upgrade on continue-as-new). With
 * versioning off the option has no effect.
 */
import { makeContinueAsNewFunc, workflowInfo, type Workflow } from '@temporalio/workflow';

/**
 * The server made another version current (or ramping) for this pinned run: continue as new soon,
 * so the loop leaves the old version within a tick instead of at its next history rollover. Read
 * from the workflow task's started event, so a replay sees what the run saw.
 */
export function targetVersionChanged(): boolean {
  return workflowInfo().targetWorkerDeploymentVersionChanged;
}

/** `continueAsNew` whose next run starts on the current version of the task queue's deployment. */
export function continueAsNewToCurrentVersion<F extends Workflow>(...args: Parameters<F>): Promise<never> {
  return makeContinueAsNewFunc<F>({ initialVersioningBehavior: 'AUTO_UPGRADE' })(...args);
}
