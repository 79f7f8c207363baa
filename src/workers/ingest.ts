/**
 * Worker entry of the `polling-ingest` task queue: the async ingest's stream
 * consumer (batched PostgreSQL writes, INGEST_CONCURRENCY at once) and its backlog monitor run
 * with it. Scale this process independently: every process joins the same consumer group.
 */
import { loadConfigOrExit } from '../config/index.js';
import { runWorkersUntilSignal } from './run.js';

await runWorkersUntilSignal(loadConfigOrExit(), ['ingest']);
