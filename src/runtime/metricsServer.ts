/**
 * A small HTTP server for processes that have no API of their own (the workers): `/metrics` in
 * the Prometheus text format — the process' prom-client registry followed by any other sources
 * (the Temporal SDK's exporter) — and the health contract of src/runtime/health.ts: `/livez`,
 * `/readyz` and its alias `/healthz`, 200 or 503 with a JSON body.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { HEALTH_PATHS, healthStatusCode, isHealthPath, type HealthKind, type HealthReport } from './health.js';

export interface MetricsServerOptions {
  readonly host: string;
  /** 0 picks a free port (several processes on one host). */
  readonly port: number;
  readonly registry: Registry;
  /** More exposition text appended to the registry's (names must not collide with it). */
  readonly extraMetrics?: readonly (() => Promise<string>)[];
  /** The process' answers to `/livez` (live) and `/readyz` (ready). */
  readonly health: Readonly<Record<HealthKind, () => HealthReport | Promise<HealthReport>>>;
  /** Reports a source that could not be read; the scrape still answers with the rest. */
  readonly onError?: (what: string, error: unknown) => void;
}

export interface RunningMetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

async function metricsText(options: MetricsServerOptions): Promise<string> {
  const parts = [await options.registry.metrics()];
  for (const source of options.extraMetrics ?? []) {
    try {
      parts.push(await source());
    } catch (error) {
      options.onError?.('metrics source', error);
    }
  }
  return parts.map((part) => (part.endsWith('\n') ? part : `${part}\n`)).join('');
}

async function handle(options: MetricsServerOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const path = (request.url ?? '/').split('?')[0] ?? '/';
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { allow: 'GET, HEAD' }).end();
  } else if (path === '/metrics') {
    const body = await metricsText(options);
    response.writeHead(200, { 'content-type': options.registry.contentType }).end(body);
  } else if (isHealthPath(path)) {
    const report = await options.health[HEALTH_PATHS[path]]();
    response.writeHead(healthStatusCode(report), { 'content-type': 'application/json' }).end(JSON.stringify(report));
  } else {
    response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: `no route ${path}` } }));
  }
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<RunningMetricsServer> {
  const server = createServer((request, response) => {
    handle(options, request, response).catch((error: unknown) => {
      options.onError?.(`GET ${request.url ?? ''}`, error);
      if (!response.headersSent) response.writeHead(500);
      response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A free TCP port on `host` right now (for exporters that need a fixed address up front). */
export async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
