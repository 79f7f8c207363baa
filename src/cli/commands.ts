/**
 * The CLI's commands, the API's operations from a shell: each maps its arguments onto one
 * API call. Every command has a usage line and `--help`.
 */
import { readFile } from 'node:fs/promises';
import type { ParseArgsConfig } from 'node:util';
import type { ApiClient } from './http.js';

type Options = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | boolean | undefined>;

export interface Command {
  /** e.g. `cards list`. */
  readonly name: string;
  readonly usage: string;
  readonly summary: string;
  readonly options: Options;
  readonly positionals: number;
  run(client: ApiClient, positionals: string[], values: Values): Promise<unknown>;
}

const bodyOptions: Options = {
  data: { type: 'string', short: 'd' },
  file: { type: 'string', short: 'f' },
};
const pageOptions: Options = {
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
};

/** `--data '<json>'` or `--file path` (`-` = stdin). */
async function readBody(values: Values): Promise<unknown> {
  const text = typeof values.data === 'string' ? values.data : typeof values.file === 'string' ? await readText(values.file) : undefined;
  if (text === undefined) throw new UsageError("give the body with --data '<json>' or --file <path>");
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`the body is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function readText(path: string): Promise<string> {
  if (path !== '-') return readFile(path, 'utf8');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export class UsageError extends Error {}

function query(values: Values, names: Record<string, string>): string {
  const params = new URLSearchParams();
  for (const [option, param] of Object.entries(names)) {
    const value = values[option];
    if (typeof value === 'string') params.set(param, value);
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/** One page, or with --all every page followed through nextCursor. */
async function list(client: ApiClient, path: string, values: Values, filters: Record<string, string>): Promise<unknown> {
  const names = { ...filters, limit: 'limit', cursor: 'cursor' };
  if (values.all !== true) return client.request('GET', `${path}${query(values, names)}`);
  const items: unknown[] = [];
  let cursor: string | undefined;
  do {
    const page = (await client.request('GET', `${path}${query({ ...values, cursor }, names)}`)) as { items: unknown[]; nextCursor?: string };
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return { items };
}

const csvNumbers = (text: string | boolean | undefined): number[] | undefined =>
  typeof text === 'string'
    ? text
        .split(',')
        .filter((part) => part !== '')
        .map(Number)
    : undefined;

function bool(value: string | boolean | undefined, option: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true' || value === true) return true;
  if (value === 'false') return false;
  throw new UsageError(`--${option} must be true or false`);
}

export const COMMANDS: readonly Command[] = [
  {
    name: 'carriers list',
    usage: 'carriers list [--limit n] [--cursor c] [--all]',
    summary: 'list carrier accounts',
    options: pageOptions,
    positionals: 0,
    run: (client, _args, values) => list(client, '/v1/carriers', values, {}),
  },
  {
    name: 'carriers create',
    usage: 'carriers create (--data <json> | --file <path>)',
    summary: 'create a carrier account',
    options: bodyOptions,
    positionals: 0,
    run: async (client, _args, values) => client.request('POST', '/v1/carriers', { body: await readBody(values) }),
  },
  {
    name: 'carriers get',
    usage: 'carriers get <id>',
    summary: 'show one carrier account',
    options: {},
    positionals: 1,
    run: (client, [id]) => client.request('GET', `/v1/carriers/${encodeURIComponent(id!)}`),
  },
  {
    name: 'carriers update',
    usage: 'carriers update <id> (--data <json> | --file <path>)',
    summary: 'change a carrier account (groups/typeGroups replace the set)',
    options: bodyOptions,
    positionals: 1,
    run: async (client, [id], values) => client.request('PATCH', `/v1/carriers/${encodeURIComponent(id!)}`, { body: await readBody(values) }),
  },
  {
    name: 'configs list',
    usage: 'configs list [--limit n] [--cursor c] [--all]',
    summary: 'list polling configs',
    options: pageOptions,
    positionals: 0,
    run: (client, _args, values) => list(client, '/v1/polling-configs', values, {}),
  },
  {
    name: 'configs create',
    usage: 'configs create (--data <json> | --file <path>)',
    summary: 'create a polling config',
    options: bodyOptions,
    positionals: 0,
    run: async (client, _args, values) => client.request('POST', '/v1/polling-configs', { body: await readBody(values) }),
  },
  {
    name: 'configs update',
    usage: 'configs update <id> (--data <json> | --file <path>)',
    summary: 'change a polling config',
    options: bodyOptions,
    positionals: 1,
    run: async (client, [id], values) => client.request('PATCH', `/v1/polling-configs/${encodeURIComponent(id!)}`, { body: await readBody(values) }),
  },
  {
    name: 'configs delete',
    usage: 'configs delete <id>',
    summary: 'delete a polling config',
    options: {},
    positionals: 1,
    run: async (client, [id]) => (await client.request('DELETE', `/v1/polling-configs/${encodeURIComponent(id!)}`)) ?? { deleted: id },
  },
  {
    name: 'cards list',
    usage: 'cards list [--carrier-id id] [--status s] [--polled true|false] [--limit n] [--cursor c] [--all]',
    summary: 'list cards',
    options: { ...pageOptions, 'carrier-id': { type: 'string' }, status: { type: 'string' }, polled: { type: 'string' } },
    positionals: 0,
    run: (client, _args, values) => list(client, '/v1/cards', values, { 'carrier-id': 'carrierId', status: 'status', polled: 'polled' }),
  },
  {
    name: 'cards create',
    usage: 'cards create (--data <json> | --file <path>)',
    summary: 'create one card',
    options: bodyOptions,
    positionals: 0,
    run: async (client, _args, values) => client.request('POST', '/v1/cards', { body: await readBody(values) }),
  },
  {
    name: 'cards get',
    usage: 'cards get <id>',
    summary: 'card detail: due times, failures, alerts, executions, Web UI link',
    options: {},
    positionals: 1,
    run: (client, [id]) => client.request('GET', `/v1/cards/${encodeURIComponent(id!)}`),
  },
  {
    name: 'cards import',
    usage: 'cards import <file.json | file.ndjson | -> [--ndjson] [--on-existing reject|skip|update]',
    summary:
      'import up to 50 000 cards (JSON array, or NDJSON by extension or --ndjson); --on-existing says what a row whose ICCID exists does (default reject)',
    options: { ndjson: { type: 'boolean' }, 'on-existing': { type: 'string' } },
    positionals: 1,
    run: async (client, [file], values) => {
      const ndjson = values.ndjson === true || /\.(ndjson|jsonl)$/i.test(file!);
      const onExisting = values['on-existing'];
      const query = typeof onExisting === 'string' ? `?onExisting=${encodeURIComponent(onExisting)}` : '';
      return client.request('POST', `/v1/cards/import${query}`, {
        raw: await readText(file!),
        contentType: ndjson ? 'application/x-ndjson' : 'application/json',
      });
    },
  },
  {
    name: 'cards patch',
    usage: 'cards patch <id> [--enable-polling true|false] [--status s] [--carrier-id id]',
    summary: 'enable/disable polling, change status or carrier account',
    options: { 'enable-polling': { type: 'string' }, status: { type: 'string' }, 'carrier-id': { type: 'string' } },
    positionals: 1,
    run: (client, [id], values) => {
      const enablePolling = bool(values['enable-polling'], 'enable-polling');
      const body = {
        ...(enablePolling === undefined ? {} : { enablePolling }),
        ...(typeof values.status === 'string' ? { status: values.status } : {}),
        ...(typeof values['carrier-id'] === 'string' ? { carrierId: values['carrier-id'] } : {}),
      };
      return client.request('PATCH', `/v1/cards/${encodeURIComponent(id!)}`, { body });
    },
  },
  {
    name: 'cards delete',
    usage: 'cards delete <id>',
    summary: 'delete a card',
    options: {},
    positionals: 1,
    run: async (client, [id]) => (await client.request('DELETE', `/v1/cards/${encodeURIComponent(id!)}`)) ?? { deleted: id },
  },
  {
    name: 'request-check',
    usage: 'request-check <cardId> --types t1,t2 [--lane priority|normal] [--cooldown-ms n] [--confirm-delays 10,30,60 --expected offline]',
    summary: 'ask for an immediate check of a card',
    options: {
      types: { type: 'string' },
      lane: { type: 'string' },
      'cooldown-ms': { type: 'string' },
      'confirm-delays': { type: 'string' },
      expected: { type: 'string' },
    },
    positionals: 1,
    run: (client, [id], values) => {
      const body = {
        types: typeof values.types === 'string' ? values.types.split(',').filter((type) => type !== '') : [],
        ...(typeof values.lane === 'string' ? { lane: values.lane } : {}),
        ...(typeof values['cooldown-ms'] === 'string' ? { cooldownMs: Number(values['cooldown-ms']) } : {}),
        ...(values['confirm-delays'] === undefined ? {} : { confirmDelaysSec: csvNumbers(values['confirm-delays']) }),
        ...(typeof values.expected === 'string' ? { expected: values.expected } : {}),
      };
      return client.request('POST', `/v1/cards/${encodeURIComponent(id!)}/request-check`, { body });
    },
  },
  {
    name: 'request-checks',
    usage:
      'request-checks (--cards 1,2,3 | --carrier <id> [--status active]) --types t1,t2 [--lane priority|normal] [--cooldown-ms n] [--confirm-delays 10,30,60 --expected offline]',
    summary: "ask for an immediate check of many cards (by id, or an account's polled cards); one result per card",
    options: {
      cards: { type: 'string' },
      carrier: { type: 'string' },
      status: { type: 'string' },
      types: { type: 'string' },
      lane: { type: 'string' },
      'cooldown-ms': { type: 'string' },
      'confirm-delays': { type: 'string' },
      expected: { type: 'string' },
    },
    positionals: 0,
    run: (client, _positionals, values) => {
      const body = {
        ...(typeof values.cards === 'string' ? { cardIds: values.cards.split(',').filter((id) => id !== '') } : {}),
        ...(typeof values.carrier === 'string'
          ? { filter: { carrierId: values.carrier, ...(typeof values.status === 'string' ? { status: values.status } : {}) } }
          : {}),
        types: typeof values.types === 'string' ? values.types.split(',').filter((type) => type !== '') : [],
        ...(typeof values.lane === 'string' ? { lane: values.lane } : {}),
        ...(typeof values['cooldown-ms'] === 'string' ? { cooldownMs: Number(values['cooldown-ms']) } : {}),
        ...(values['confirm-delays'] === undefined ? {} : { confirmDelaysSec: csvNumbers(values['confirm-delays']) }),
        ...(typeof values.expected === 'string' ? { expected: values.expected } : {}),
      };
      return client.request('POST', '/v1/request-checks', { body });
    },
  },
  {
    name: 'mode get',
    usage: 'mode get',
    summary: 'show the polling mode',
    options: {},
    positionals: 0,
    run: (client) => client.request('GET', '/v1/mode'),
  },
  {
    name: 'mode set',
    usage: 'mode set <carrier|legacy>',
    summary: 'switch the polling mode through pollingControl',
    options: {},
    positionals: 1,
    run: (client, [mode]) => client.request('PUT', '/v1/mode', { body: { mode } }),
  },
  {
    name: 'ingest get',
    usage: 'ingest get',
    summary: 'show the ingest mode (sync | async)',
    options: {},
    positionals: 0,
    run: (client) => client.request('GET', '/v1/mode/ingest'),
  },
  {
    name: 'ingest set',
    usage: 'ingest set <sync|async>',
    summary: 'switch the ingest mode at run time (no restart; no record in flight is lost)',
    options: {},
    positionals: 1,
    run: (client, [mode]) => client.request('PUT', '/v1/mode/ingest', { body: { mode } }),
  },
  {
    name: 'status',
    usage: 'status <carrierId>',
    summary: 'account status: lanes, in-flight, budget use, lateness, capacity',
    options: {},
    positionals: 1,
    run: (client, [id]) => client.request('GET', `/v1/carriers/${encodeURIComponent(id!)}/status`),
  },
  {
    name: 'alerts list',
    usage: 'alerts list [--kind failure|account] [--status open|all] [--carrier-id id] [--card-id id] [--limit n] [--cursor c] [--all]',
    summary: 'list alerts (open by default)',
    options: { ...pageOptions, kind: { type: 'string' }, status: { type: 'string' }, 'carrier-id': { type: 'string' }, 'card-id': { type: 'string' } },
    positionals: 0,
    run: (client, _args, values) => list(client, '/v1/alerts', values, { kind: 'kind', status: 'status', 'carrier-id': 'carrierId', 'card-id': 'cardId' }),
  },
  {
    name: 'alerts ack',
    usage: 'alerts ack <id>',
    summary: 'acknowledge an alert (failure-<n>, account-<n>)',
    options: {},
    positionals: 1,
    run: (client, [id]) => client.request('POST', `/v1/alerts/${encodeURIComponent(id!)}/ack`),
  },
  {
    name: 'health',
    usage: 'health',
    summary: "the API's readiness: whether PostgreSQL, Redis and Temporal answer it (/readyz)",
    options: {},
    positionals: 0,
    run: (client) => client.request('GET', '/readyz'),
  },
];
