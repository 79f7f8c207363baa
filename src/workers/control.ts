/** Worker entry of the `polling-control` task queue. Scale this process independently. */
import { loadConfigOrExit } from '../config/index.js';
import { runWorkersUntilSignal } from './run.js';

await runWorkersUntilSignal(loadConfigOrExit(), ['control']);
