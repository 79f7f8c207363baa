/**
 * Bearer-token authentication on every route except health and metrics and routes
 * that declare themselves public in their config (`config: { public: true }`: static pages that
 * hold no data and carry no token). Both sides are hashed before comparing so the buffers always
 * have equal length and neither the token nor its length leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { errorBody } from './errors.js';
import { HEALTH_PATHS } from '../runtime/health.js';

/** Paths scraped or probed by infrastructure that holds no token. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set([...Object.keys(HEALTH_PATHS), '/metrics']);

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

export function tokenMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/.exec(header ?? '');
  // Compare against something even when the header is malformed so the timing stays the same.
  const presented = digest(match?.[1] ?? '');
  return timingSafeEqual(presented, digest(token)) && match !== null;
}

export function registerAuth(app: FastifyInstance, token: string): void {
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    if (PUBLIC_PATHS.has(path) || request.routeOptions.config.public === true) return;
    if (tokenMatches(request.headers.authorization, token)) return;
    // No detail: whether the header was missing, malformed or wrong is not the caller's business.
    await reply.status(401).header('www-authenticate', 'Bearer').send(errorBody('unauthorized', 'unauthorized'));
  });
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Served without the bearer token (a page or asset that holds no data). */
    public?: boolean;
  }
}
