/** Development entry: the workers of all four task queues in one process. */
import { loadConfigOrExit } from '../config/index.js';
import { WORKER_KINDS } from './createWorker.js';
import { runWorkersUntilSignal } from './run.js';

await runWorkersUntilSignal(loadConfigOrExit(), WORKER_KINDS);
