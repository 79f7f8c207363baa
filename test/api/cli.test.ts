import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { COMMANDS } from '../../src/cli/commands.js';
import { main } from '../../src/cli/main.js';
import { carrierBody, createApiStack, iccid, type ApiStack } from './helpers.js';

const run = promisify(execFile);
const BIN = new URL('../../bin/cardpoller.js', import.meta.url).pathname;

let api: ApiStack;
let url: string;

before(async () => {
  api = await createApiStack('api-cli');
  url = await api.app.listen({ host: '127.0.0.1', port: 0 });
});
after(async () => {
  await api.close();
});

/** Runs the real binary against the listening API; never throws, returns exit code and output. */
async function cli(args: string[], token = api.stack.config.API_TOKEN): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, API_URL: url, API_TOKEN: token } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** Calls main() in-process and captures what it prints (fast, for --help of every command). */
async function captured(argv: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  };
  try {
    return { code: await main(argv, { API_URL: url }), out };
  } finally {
    process.stdout.write = write;
  }
}

test('every command answers --help with its usage', async () => {
  for (const command of COMMANDS) {
    const { code, out } = await captured([...command.name.split(' '), '--help']);
    assert.equal(code, 0, command.name);
    assert.ok(out.startsWith(`usage: cardpoller ${command.name}`), `${command.name}: ${out}`);
  }
  const overview = await captured(['--help']);
  assert.equal(overview.code, 0);
  assert.ok(COMMANDS.every((command) => overview.out.includes(command.name)));
});

test('the CLI drives the API: create, import NDJSON, list, get, patch; errors print message and field and exit non-zero', async () => {
  const created = await cli(['carriers', 'create', '--data', JSON.stringify(carrierBody('cli-acct'))]);
  assert.equal(created.code, 0, created.stderr);
  const carrier = JSON.parse(created.stdout) as { id: string };
  const dir = await mkdtemp(join(tmpdir(), 'cardpoller-cli-'));
  const file = join(dir, 'cards.ndjson');
  await writeFile(file, [0, 1, 2].map((i) => JSON.stringify({ iccid: iccid(i, '8944'), carrierId: carrier.id })).join('\n'));
  const imported = await cli(['cards', 'import', file]);
  assert.equal(imported.code, 0, imported.stderr);
  assert.deepEqual(JSON.parse(imported.stdout), { accepted: 3, rejected: [] });
  const listed = await cli(['cards', 'list', '--carrier-id', carrier.id, '--limit', '2', '--all']);
  const cards = (JSON.parse(listed.stdout) as { items: { id: string }[] }).items;
  assert.equal(cards.length, 3);
  const patched = await cli(['cards', 'patch', cards[0]!.id, '--enable-polling', 'false']);
  assert.equal((JSON.parse(patched.stdout) as { polled: boolean }).polled, false);

  const invalid = await cli(['carriers', 'create', '--data', JSON.stringify(carrierBody('cli-bad', { inflightLimit: 0 }))]);
  assert.equal(invalid.code, 1);
  assert.match(invalid.stderr, /inflightLimit must be >= 1, got 0 \(field: inflightLimit\) \[400 invalid\]/);
  const missing = await cli(['cards', 'get', '999999']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /card 999999 does not exist.*\[404 not_found\]/);
  const unauthorized = await cli(['mode', 'get'], 'wrong-token-123');
  assert.equal(unauthorized.code, 1);
  assert.match(unauthorized.stderr, /unauthorized/);
  const usage = await cli(['cards', 'get']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /usage: cardpoller cards get <id>/);
});

test('off loopback the CLI requires API_TOKEN: it names it and sends no request with the development token', async () => {
  const calls: string[] = [];
  const realFetch = globalThis.fetch;
  let err = '';
  const write = process.stderr.write.bind(process.stderr);
  // No request may leave this machine: a call is recorded and fails as an unreachable host would.
  globalThis.fetch = (input: string | URL | Request) => {
    calls.push(String(input instanceof Request ? input.url : input));
    return Promise.reject(new TypeError('fetch failed'));
  };
  process.stderr.write = (chunk: string | Uint8Array) => {
    err += String(chunk);
    return true;
  };
  let code: number;
  try {
    code = await main(['carriers', 'list'], { API_URL: 'http://card-poller.example.com:8080' });
  } finally {
    globalThis.fetch = realFetch;
    process.stderr.write = write;
  }
  assert.deepEqual(calls, [], 'no request was sent');
  assert.equal(code, 2);
  assert.match(err, /API_TOKEN is required: API_URL=http:\/\/card-poller\.example\.com:8080 is not a loopback address/);
  // On loopback the development token still serves `npm start` with no setup.
  assert.equal(await main(['carriers', 'list'], { API_URL: url }), 0);
});
