/**
 * storageMaintenance: one run of the storage upkeep (observation partitions ahead, data past
 * retention removed), started hourly by the `storage-maintenance` schedule (see
 * polling/temporalControl.ts). A run is one activity; the schedule skips a start while one runs.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control.js';
import type { MaintenanceResult } from '../db/retention.js';

const { maintainStorage } = proxyActivities<ControlActivities>({
  // Deleting a backlog of old execution rows in batches can take minutes the first time.
  startToCloseTimeout: '30 minutes',
  retry: { initialInterval: '10 s', maximumInterval: '5 min', maximumAttempts: 10 },
});

export async function storageMaintenance(): Promise<MaintenanceResult> {
  return maintainStorage();
}
