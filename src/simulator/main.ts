/**
 * Entry point of the carrier gateway simulator (`npm run sim`). Listens on SIMULATOR_HOST /
 * SIMULATOR_PORT; `--seed=<n>` makes its random choices reproducible.
 */
import { pino } from 'pino';
import { loadConfigOrExit } from '../config/index.js';
import { startSimulator } from './server.js';

const config = loadConfigOrExit();
const logger = pino({ level: config.LOG_LEVEL, name: 'simulator' });
const seedArg = process.argv.find((arg) => arg.startsWith('--seed='));
const seed = seedArg === undefined ? undefined : Number(seedArg.slice('--seed='.length));
if (seed !== undefined && !Number.isInteger(seed)) {
  process.stderr.write(`--seed must be an integer, got ${seedArg}\n`);
  process.exit(2);
}

const simulator = await startSimulator({
  host: config.SIMULATOR_HOST,
  port: config.SIMULATOR_PORT,
  ...(seed === undefined ? {} : { seed }),
});
logger.info({ url: simulator.url, seed }, 'carrier gateway simulator listening');

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'simulator stopping');
    void simulator.close().then(() => process.exit(0));
  });
}
