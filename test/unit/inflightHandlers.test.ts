/**
 * The API's close waits for route handlers whose client went away (src/api/inflightHandlers.ts):
 * a real HTTP request, aborted by its client while the handler is still working, then the
 * server closed. Without the tracking Fastify's close resolves at once (no connection is left),
 * and the process would close its connections under the handler.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import Fastify from 'fastify';
import { waitForHandlersOnClose } from '../../src/api/inflightHandlers.js';

async function serverWithSlowRoute(track: boolean, maxWaitMs?: number) {
  const app = Fastify({ logger: false });
  if (track) waitForHandlersOnClose(app, maxWaitMs);
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let started: () => void = () => undefined;
  const handlerStarted = new Promise<void>((resolve) => (started = resolve));
  const events: string[] = [];
  app.get('/slow', async () => {
    started();
    await released;
    events.push('handler done');
    return { ok: true };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  // The client gives up while the handler works: its connection is gone.
  const call = request({ host: '127.0.0.1', port: address.port, path: '/slow' });
  call.on('error', () => undefined);
  call.end();
  await handlerStarted;
  call.destroy();
  await new Promise((resolve) => setTimeout(resolve, 50));
  return { app, release, events };
}

test('close waits for a handler whose client went away, then resolves', async () => {
  const { app, release, events } = await serverWithSlowRoute(true);
  const closed = app.close().then(() => void events.push('closed'));
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual(events, [], 'closed while the handler was still running');
  release();
  await closed;
  assert.deepEqual(events, ['handler done', 'closed']);
});

test('without it, Fastify closes under the running handler (what the tracking is for)', async () => {
  const { app, release, events } = await serverWithSlowRoute(false);
  await app.close();
  events.push('closed');
  release();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(events, ['closed', 'handler done']);
});

test('a handler stuck past the bound does not hold the close forever', async () => {
  const { app, release, events } = await serverWithSlowRoute(true, 100);
  await app.close();
  events.push('closed');
  release();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(events, ['closed', 'handler done']);
});
