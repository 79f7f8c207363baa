/**
 * `npm run services:up` / `services:down`: start or stop Temporal, Redis and PostgreSQL on
 * loopback (idempotent; what already runs is reused).
 */
import { loadConfigOrExit } from '../src/config/index.js';
import { servicesDown, servicesUp } from '../src/services/index.js';

const HELP = `usage: tsx scripts/services.ts <up|down> [--test]

  up      start (or reuse) Temporal dev server + Web UI, Redis, PostgreSQL on 127.0.0.1
  down    stop the services this project started
  --test  Redis without persistence (throw-away test data)

Services whose URL is set (TEMPORAL_ADDRESS, REDIS_URL, DATABASE_URL) are external and left alone.`;

async function main(): Promise<void> {
  const [command, ...flags] = process.argv.slice(2);
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const config = loadConfigOrExit();
  const log = (line: string): void => void process.stdout.write(`[services] ${line}\n`);
  if (command === 'up') {
    const started = Date.now();
    const addresses = await servicesUp(config, { redisPersistence: flags.includes('--test') ? 'none' : 'aof', log });
    log(`all up in ${Date.now() - started} ms`);
    log(`Temporal gRPC  ${addresses.temporal}`);
    log(`Temporal UI    ${addresses.temporalUi}`);
    log(`Redis          ${addresses.redis}`);
    log(`PostgreSQL     ${addresses.postgres}`);
  } else if (command === 'down') {
    await servicesDown(config, log);
  } else {
    process.stderr.write(`unknown command "${command}"\n${HELP}\n`);
    process.exitCode = 2;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`[services] ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  if (error instanceof AggregateError) for (const e of error.errors) process.stderr.write(`  - ${String(e)}\n`);
  process.exitCode = 1;
});
