/**
 * `npm run temporal:setup` (scripts/temporalSetup.ts) on a namespace the project did not create:
 * a fresh one registered here on the dev server. The first run adds every search attribute, the
 * second finds them all (idempotent); an attribute registered with another type is refused by name.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { msToTs } from '@temporalio/common/lib/time.js';
import { loadConfig } from '../../src/config/index.js';
import { SEARCH_ATTRIBUTES } from '../../src/workflow-safe/searchAttributes.js';
import { registerSearchAttributes, SearchAttributeConflictError } from '../../scripts/temporalSetup.js';
import { uniqueName } from '../../testkit/temporal.js';
import { waitFor } from '../../testkit/seed.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

const run = promisify(execFile);
const SCRIPT = new URL('../../scripts/temporalSetup.ts', import.meta.url).pathname;
const { IndexedValueType } = proto.temporal.api.enums.v1;

async function setup(address: string, namespace: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [...typescriptExecArgv(), SCRIPT, '--address', address, '--namespace', namespace]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** A namespace of its own on the shared dev server, usable once the operator service sees it; deleted after. */
async function withFreshNamespace(connection: Connection, label: string, fn: (namespace: string) => Promise<void>): Promise<void> {
  const namespace = uniqueName(label);
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  try {
    await waitFor(`namespace ${namespace} to be served`, () => connection.operatorService.listSearchAttributes({ namespace }).catch(() => undefined), 60_000);
    await fn(namespace);
  } finally {
    await connection.operatorService.deleteNamespace({ namespace }).catch(() => undefined);
  }
}

test('temporal:setup registers the search attributes on an existing namespace, idempotently', async () => {
  const address = loadConfig().TEMPORAL_ADDRESS;
  const connection = await Connection.connect({ address });
  try {
    await withFreshNamespace(connection, 'setup-sa', async (namespace) => {
      const first = await setup(address, namespace);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, new RegExp(`namespace ${namespace} at ${address}: ${Object.keys(SEARCH_ATTRIBUTES).length} added, 0 already registered`));

      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
      assert.equal(customAttributes?.CardId, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD);
      assert.equal(customAttributes?.CheckTypes, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST);
      for (const name of Object.keys(SEARCH_ATTRIBUTES)) assert.ok(customAttributes?.[name] !== undefined, name);

      const second = await setup(address, namespace);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /: 0 added, 6 already registered/);
    });
  } finally {
    await connection.close();
  }
});

test('an attribute registered with another type is refused, naming it and both types', async () => {
  const address = loadConfig().TEMPORAL_ADDRESS;
  const connection = await Connection.connect({ address });
  try {
    await withFreshNamespace(connection, 'setup-sa-conflict', async (namespace) => {
      await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: { Outcome: IndexedValueType.INDEXED_VALUE_TYPE_TEXT } });
      await waitFor(
        'Outcome to be listed',
        async () => (await connection.operatorService.listSearchAttributes({ namespace })).customAttributes?.Outcome !== undefined,
        30_000,
      );
      await assert.rejects(
        registerSearchAttributes(connection, namespace),
        (error: unknown) => error instanceof SearchAttributeConflictError && /Outcome is Text, the workflows need Keyword/.test(error.message),
      );
    });
  } finally {
    await connection.close();
  }
});
