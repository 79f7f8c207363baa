/** Redis from Debian's `redis-server`, installed with apt-get when missing (we run as root here). */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileAsync, isTcpOpen, spawnDetached, stopPidFile, waitUntil } from './process.js';

async function which(binary: string): Promise<string | undefined> {
  try {
    const { stdout } = await execFileAsync('sh', ['-c', `command -v ${binary}`]);
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * One install per process: `services up --cluster` starts the single Redis and the cluster's nodes
 * side by side, and a second apt-get beside the first fails on its lock ("Could not get lock
 * /var/lib/apt/lists/lock").
 */
let installing: Promise<string> | undefined;

export async function ensureRedisServer(log: (line: string) => void): Promise<string> {
  const found = await which('redis-server');
  if (found) return found;
  installing ??= installRedisServer(log).finally(() => {
    installing = undefined;
  });
  return installing;
}

async function installRedisServer(log: (line: string) => void): Promise<string> {
  log('installing redis-server with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await execFileAsync('apt-get', ['update', '-qq'], { env, maxBuffer: 64 * 1024 * 1024 });
  await execFileAsync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'redis-server'], { env, maxBuffer: 64 * 1024 * 1024 });
  const installed = await which('redis-server');
  if (!installed) throw new Error('redis-server is still missing after apt-get install');
  return installed;
}

export interface RedisOptions {
  readonly host: string;
  readonly port: number;
  /** Append-only file on (development) or no persistence at all (throw-away test data). */
  readonly persistence: 'aof' | 'none';
}

export async function startRedis(options: RedisOptions, dir: string, log: (line: string) => void): Promise<'reused' | 'started'> {
  if (await isTcpOpen(options.host, options.port)) return 'reused';
  const binary = await ensureRedisServer(log);
  mkdirSync(dir, { recursive: true });
  const args = [
    '--bind',
    options.host,
    '--port',
    String(options.port),
    '--dir',
    dir,
    // Leases and due scores must never be evicted (docs/design.md, 'Failure handling').
    '--maxmemory-policy',
    'noeviction',
    '--save',
    '',
    '--appendonly',
    options.persistence === 'aof' ? 'yes' : 'no',
    '--appendfsync',
    'everysec',
    '--daemonize',
    'no',
  ];
  spawnDetached(binary, args, join(dir, 'redis.log'), join(dir, 'redis.pid'));
  const waited = await waitUntil('Redis port', () => isTcpOpen(options.host, options.port), 20_000);
  log(`redis ready in ${waited} ms`);
  return 'started';
}

export async function stopRedis(dir: string): Promise<boolean> {
  return existsSync(join(dir, 'redis.pid')) ? stopPidFile(join(dir, 'redis.pid')) : false;
}
