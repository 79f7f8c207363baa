/** Worker entry of the `polling-control` task queue (DESIGN §2.2). Scale this process independently. */
import { loadConfigOrExit } from '../config/index.js';
import { runWorkersUntilSignal } from './run.js';

await runWorkersUntilSignal(loadConfigOrExit(), ['control']);
