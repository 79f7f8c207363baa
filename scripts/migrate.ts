/** `npm run migrate`: brings the configured database schema to the newest migration. */
import { loadConfigOrExit } from '../src/config/index.js';
import { createPool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';

if (process.argv.includes('--help')) {
  process.stdout.write('usage: npm run migrate\n\nApplies pending migrations in migrations/ to DATABASE_URL, schema DATABASE_SCHEMA.\n');
} else {
  const config = loadConfigOrExit();
  const pool = createPool({ url: config.DATABASE_URL, schema: config.DATABASE_SCHEMA, max: 1 });
  try {
    const result = await migrate(pool, config.DATABASE_SCHEMA);
    process.stdout.write(
      `schema ${config.DATABASE_SCHEMA} at migration ${result.current}` +
        (result.applied.length > 0 ? ` (applied ${result.applied.join(', ')})\n` : ' (nothing to apply)\n'),
    );
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exitCode = 1;
  } finally {
    await pool.end();
  }
}
