/**
 * Ties the async ingest to the `polling-ingest` Temporal worker of the same process: it starts
 * with the worker and stops when the worker stops (shutdown, or polls given up), so every entry
 * point and test stack that runs an ingest worker runs the ingest, with no lifecycle of its own.
 */
import type { Worker } from '@temporalio/worker';
import { startIngest, type IngestService, type IngestServiceInput } from './service.js';

const ALIVE_STATES = new Set(['INITIALIZED', 'RUNNING']);
const WATCH_MS = 250;

export function runIngestWithWorker(worker: Pick<Worker, 'getState'>, input: IngestServiceInput): IngestService {
  const service = startIngest(input);
  const watch = setInterval(() => {
    if (ALIVE_STATES.has(worker.getState())) return;
    clearInterval(watch);
    void service.stop();
  }, WATCH_MS);
  // Nothing else to wait for must not keep the process alive.
  watch.unref();
  return service;
}
