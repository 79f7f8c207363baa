/**
 * Entry point of the carrier gateway simulator (`npm run sim`). Listens on SIMULATOR_HOST /
 * SIMULATOR_PORT, or on `--host=<h>` / `--port=<n>` (0 = any free port); `--seed=<n>` makes its
 * random choices reproducible.
 *
 * Started by another process with an IPC channel (src/simulator/childProcess.ts), it sends that
 * process its URL once it listens and exits when the channel closes (its parent is gone).
 */
import { loadConfigOrExit } from '../config/index.js';
import { createProcessLogger } from '../runtime/logger.js';
import { startSimulator } from './server.js';
import type { SimulatorListening } from './childProcess.js';

const config = loadConfigOrExit();
const logger = createProcessLogger(config, 'simulator');

/** The value of `--<name>=<value>`, or undefined when absent. */
const flag = (name: string): string | undefined => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);

/** An integer flag in [min, max]; a bad value stops the process naming the flag. */
function integerFlag(name: string, min: number, max: number): number | undefined {
  const text = flag(name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text === '' || !Number.isInteger(value) || value < min || value > max) {
    logger.fatal({ flag: name, value: text }, `--${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return value;
}

const seed = integerFlag('seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
const port = integerFlag('port', 0, 65535) ?? config.SIMULATOR_PORT;
const host = flag('host') || config.SIMULATOR_HOST;

const simulator = await startSimulator({ host, port, ...(seed === undefined ? {} : { seed }) });
logger.info({ url: simulator.url, seed }, 'carrier gateway simulator listening');

let stopping = false;
const stop = (reason: string): void => {
  if (stopping) return;
  stopping = true;
  logger.info({ reason }, 'simulator stopping');
  void simulator.close().then(() => process.exit(0));
};
// `on`, not `once`: a repeated signal (relayed by npm or tsx) must not kill it mid-close.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => stop(signal));

if (process.send) {
  // The channel closes when the parent exits or is killed: a simulator nobody measures any more stops.
  process.once('disconnect', () => stop('parent gone'));
  const listening: SimulatorListening = { kind: 'listening', url: simulator.url };
  if (process.connected) process.send(listening);
  else stop('parent gone');
}
