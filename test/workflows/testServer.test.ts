/**
 * The time-skipping test server the workflow tests run on: installed from the pinned pom, started
 * on a port of its own, and skipping time (an hour of workflow time passes at once).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { timeSkippingEnv } from '../../testkit/timeSkipping.js';
import { TEST_SERVER_VERSION } from '../../testkit/testServer.js';

test(`temporal-test-server ${TEST_SERVER_VERSION}: starts and skips time`, async (t) => {
  const env = await timeSkippingEnv();
  try {
    t.diagnostic(`server port open after ${env.startMs} ms`);
    assert.equal(env.supportsTimeSkipping, true);
    const before = await env.currentTimeMs();
    await env.sleep('1 hour');
    const skipped = (await env.currentTimeMs()) - before;
    assert.ok(skipped >= 3_600_000, `skipped ${skipped} ms`);
  } finally {
    await env.teardown();
  }
});
