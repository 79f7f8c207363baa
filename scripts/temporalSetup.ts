/**
 * `npm run temporal:setup -- --address host:port --namespace name`: registers the search attributes
 * the workflows set on an existing Temporal namespace (one the project did not create, e.g. a
 * self-hosted cluster's). Idempotent: attributes already registered with the right type are left
 * alone; one registered with another type is an error naming it (the workflows could not set it).
 * Defaults: TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE. `--tls` connects with TLS; TEMPORAL_API_KEY,
 * when set, is sent as the API key.
 */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { loadConfigOrExit } from '../src/config/index.js';
import { SEARCH_ATTRIBUTES } from '../src/workflow-safe/searchAttributes.js';

const IndexedValueType = proto.temporal.api.enums.v1.IndexedValueType;
type IndexedValueType = proto.temporal.api.enums.v1.IndexedValueType;

const TYPES: Readonly<Record<(typeof SEARCH_ATTRIBUTES)[string], IndexedValueType>> = {
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  KeywordList: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

/** `INDEXED_VALUE_TYPE_KEYWORD_LIST` → `KeywordList`. */
function typeName(type: IndexedValueType | null | undefined): string {
  const name = IndexedValueType[type ?? IndexedValueType.INDEXED_VALUE_TYPE_UNSPECIFIED] ?? 'UNKNOWN';
  return name
    .replace(/^INDEXED_VALUE_TYPE_/, '')
    .toLowerCase()
    .replace(/(^|_)([a-z])/g, (_match, _sep: string, letter: string) => letter.toUpperCase());
}

export class SearchAttributeConflictError extends Error {
  constructor(readonly conflicts: readonly string[]) {
    super(`search attributes registered with another type (remove or rename them first): ${conflicts.join('; ')}`);
    this.name = 'SearchAttributeConflictError';
  }
}

export interface SetupResult {
  readonly added: string[];
  readonly present: string[];
}

async function registered(connection: Connection, namespace: string): Promise<Record<string, IndexedValueType>> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  return customAttributes ?? {};
}

/** Adds the missing search attributes to `namespace`, then waits until the namespace lists them all. */
export async function registerSearchAttributes(connection: Connection, namespace: string, timeoutMs = 30_000): Promise<SetupResult> {
  const existing = await registered(connection, namespace);
  const conflicts = Object.entries(SEARCH_ATTRIBUTES)
    .filter(([name, type]) => existing[name] !== undefined && existing[name] !== TYPES[type])
    .map(([name, type]) => `${name} is ${typeName(existing[name])}, the workflows need ${type}`);
  if (conflicts.length > 0) throw new SearchAttributeConflictError(conflicts);
  const missing = Object.entries(SEARCH_ATTRIBUTES).filter(([name]) => existing[name] === undefined);
  if (missing.length > 0) {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, TYPES[type]])),
    });
    // Registration is asynchronous on some servers: done once the namespace lists every attribute.
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = await registered(connection, namespace);
      if (missing.every(([name]) => now[name] !== undefined)) break;
      if (Date.now() > deadline)
        throw new Error(`search attributes not listed on ${namespace} after ${timeoutMs} ms: ${missing.map(([name]) => name).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  return { added: missing.map(([name]) => name), present: Object.keys(SEARCH_ATTRIBUTES).filter((name) => existing[name] !== undefined) };
}

const USAGE = `usage: npm run temporal:setup -- [--address host:port] [--namespace name] [--tls]

Registers the search attributes card-poller's workflows set (${Object.entries(SEARCH_ATTRIBUTES)
  .map(([name, type]) => `${name} ${type}`)
  .join(', ')}) on an existing namespace; idempotent.
Defaults: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE. TEMPORAL_API_KEY, when set, is sent as the API key.`;

async function main(): Promise<number> {
  let values: { address?: string; namespace?: string; tls?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: { address: { type: 'string' }, namespace: { type: 'string' }, tls: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const config = loadConfigOrExit();
  const address = values.address ?? config.TEMPORAL_ADDRESS;
  const namespace = values.namespace ?? config.TEMPORAL_NAMESPACE;
  const apiKey = process.env.TEMPORAL_API_KEY;
  const connection = await Connection.connect({ address, ...(values.tls ? { tls: true } : {}), ...(apiKey ? { apiKey } : {}) });
  try {
    const result = await registerSearchAttributes(connection, namespace);
    for (const name of result.added) process.stdout.write(`${name} (${SEARCH_ATTRIBUTES[name]}): added\n`);
    for (const name of result.present) process.stdout.write(`${name} (${SEARCH_ATTRIBUTES[name]}): already registered\n`);
    process.stdout.write(`namespace ${namespace} at ${address}: ${result.added.length} added, ${result.present.length} already registered\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`temporal:setup (${namespace} at ${address}): ${(error as Error).message}\n`);
    return 1;
  } finally {
    await connection.close();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main();
}
