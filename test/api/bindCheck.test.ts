/**
 * Safe defaults off loopback (src/api/bindCheck.ts): the API process refuses to listen on a
 * non-loopback address with the development token, naming API_TOKEN and the address.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEV_API_TOKEN } from '../../src/config/index.js';
import { isLoopbackHost } from '../../src/config/loopback.js';
import { assertSafeApiBinding, UnsafeApiBindingError } from '../../src/api/bindCheck.js';
import { freePort, isRunning, spawnEntryProcess } from '../faults/entryProcess.js';
import { waitFor } from '../../testkit/seed.js';

test('loopback hosts: 127.0.0.0/8, ::1 and localhost; anything else is not', () => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST', 'api.localhost', '::ffff:127.0.0.1'])
    assert.ok(isLoopbackHost(host), host);
  for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.1', 'example.com', 'localhost.example.com', '128.0.0.1']) assert.ok(!isLoopbackHost(host), host);
});

test('the development token is accepted on loopback only; a real token anywhere', () => {
  assert.doesNotThrow(() => assertSafeApiBinding({ API_HOST: '127.0.0.1', API_TOKEN: DEV_API_TOKEN }));
  assert.doesNotThrow(() => assertSafeApiBinding({ API_HOST: '0.0.0.0', API_TOKEN: 'a-real-secret-token' }));
  assert.throws(
    () => assertSafeApiBinding({ API_HOST: '0.0.0.0', API_TOKEN: DEV_API_TOKEN }),
    (error: unknown) => error instanceof UnsafeApiBindingError && /API_HOST=0\.0\.0\.0/.test(error.message) && /API_TOKEN/.test(error.message),
  );
});

test('the API process bound to 0.0.0.0 with the development token exits with a message naming API_TOKEN and the address', async () => {
  const port = await freePort();
  const api = spawnEntryProcess('API', 'src/api/main.ts', { ...process.env, API_HOST: '0.0.0.0', API_PORT: String(port), API_TOKEN: '', LOG_LEVEL: 'warn' });
  try {
    // Either it exits (refused) or it starts listening (the defect): whichever comes first.
    await waitFor('the API to exit or listen', async () => !isRunning(api) || api.output().includes('card-poller API on'), 60_000, 100);
    assert.ok(!isRunning(api), `the API started listening on 0.0.0.0:${port} with the development token:\n${api.output()}`);
    assert.equal(await api.exited, '2');
    assert.match(api.output(), /API_HOST=0\.0\.0\.0 is not a loopback address and API_TOKEN is the development token/);
  } finally {
    if (isRunning(api)) api.child.kill('SIGTERM');
    await api.exited;
  }
});
