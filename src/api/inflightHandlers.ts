/**
 * A close that waits for the route handlers still running. Fastify's close waits for the open
 * connections, but a handler whose client went away (a dashboard tab closed, a probe that gave
 * up) has no connection left and keeps running: the close resolved before it, and the process
 * then closed the Temporal, PostgreSQL and Redis connections under it — its Temporal call,
 * retried by the client's gRPC interceptor from a timer, met the closed channel and threw
 * "Channel has been shut down" as an uncaught exception (the dashboard browser test, ci6).
 *
 * Every handler's promise is tracked from the moment it starts; the close waits for them, at most
 * `maxWaitMs` (a handler stuck longer than that is logged and left).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export const HANDLERS_CLOSE_WAIT_MS = 15_000;

type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown;

/** Call before the routes are registered: only routes added afterwards are tracked. */
export function waitForHandlersOnClose(app: FastifyInstance, maxWaitMs = HANDLERS_CLOSE_WAIT_MS): void {
  const running = new Set<Promise<unknown>>();
  app.addHook('onRoute', (route) => {
    const handler = route.handler as Handler;
    const tracked: Handler = function (request, reply) {
      const result = handler.call(this, request, reply);
      if (result instanceof Promise) {
        running.add(result);
        const done = (): void => void running.delete(result);
        result.then(done, done);
      }
      return result;
    };
    route.handler = tracked;
  });
  app.addHook('onClose', async () => {
    if (running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), maxWaitMs);
    });
    const outcome = await Promise.race([Promise.allSettled([...running]).then(() => 'done' as const), gaveUp]);
    clearTimeout(timer);
    if (outcome === 'timeout') app.log.warn({ handlers: running.size }, `closing with ${running.size} route handler(s) still running after ${maxWaitMs} ms`);
  });
}
