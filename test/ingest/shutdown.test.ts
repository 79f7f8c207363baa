/**
 * A process that runs the ingest worker closes its connections only after the async ingest (its
 * stream consumer and backlog monitor) has stopped: CI once saw the monitor's tick meet the closed
 * Redis connection during a worker's shutdown and print "ingest monitor: Connection is closed."
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { waitFor } from '../../testkit/seed.js';

/** How many Redis clients carry `name` (ioredis names a duplicate like its original). */
async function clientsNamed(stack: Stack, name: string): Promise<number> {
  const list = String(await stack.redis.redis.client('LIST'));
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

test("closing a process' connections stops its async ingest first: no ingest connection outlives them", async () => {
  const stack = await createStack('ingest-shutdown');
  try {
    const name = String(await stack.deps.redis.client('GETNAME'));
    // The process' own connection (and the test helper's, which happens to share the label).
    const before = await clientsNamed(stack, name);
    const running = await stack.startWorkers(['ingest']);
    // The consumer's blocking read holds one more connection of the same name.
    await waitFor('the ingest read connection', async () => (await clientsNamed(stack, name)) === before + 1, 10_000);
    // The connections close while the ingest worker still runs: the ingest must end before them,
    // not when it sees the worker stop (a process changes that state only around its shutdown).
    await stack.deps.close();
    assert.equal(await clientsNamed(stack, name), before - 1, 'the process connection and the ingest read connection are both closed');
    await running.stop();
  } finally {
    await stack.close();
  }
});
