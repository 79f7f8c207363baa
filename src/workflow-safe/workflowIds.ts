/**
 * The workflow ids of every run the deployment starts (and the storage schedule's id). `prefix` is
 * empty in production (ids are exactly `card-<id>` etc.); tests sharing one Temporal namespace give
 * each stack its own prefix. Pure: workflow-safe.
 */

export const pollingControlWorkflowId = (prefix = ''): string => `${prefix}polling-control`;
/** The schedule that starts storageMaintenance hourly, and the id of its runs. */
export const storageMaintenanceScheduleId = (prefix = ''): string => `${prefix}storage-maintenance`;
export const cardWorkflowId = (cardId: string, prefix = ''): string => `${prefix}card-${cardId}`;
export const schedulerWorkflowId = (carrierId: string, prefix = ''): string => `${prefix}carrier-scheduler-${carrierId}`;

/**
 * A batch run's workflow id: the round's token prefix (`<scheduler run id>.<round>`) and the batch's
 * position make it unique and deterministic, so a retried start finds the run it started before.
 */
export const cardBatchWorkflowId = (carrierId: string, tokenPrefix: string, index: number, prefix = ''): string =>
  `${prefix}card-batch-${carrierId}-${tokenPrefix}-${index}`;
