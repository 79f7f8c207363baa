/**
 * `cardpoller` — the operations CLI, an HTTP client of the API (API_URL, default
 * http://127.0.0.1:8080; token from API_TOKEN). Prints the API's JSON answer; on error prints the
 * API's message and field to stderr and exits non-zero.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { COMMANDS, UsageError, type Command, type Values } from './commands.js';
import { ApiCallError, ApiClient } from './http.js';
import { DEV_API_TOKEN } from '../config/index.js';
import { isLoopbackHost } from '../config/loopback.js';

const EXIT_API_ERROR = 1;
const EXIT_USAGE = 2;
const DEFAULT_API_URL = 'http://127.0.0.1:8080';

/**
 * The bearer token: API_TOKEN, or the API's development default (src/config) when the API is on
 * loopback, so `npm start` + CLI work with no setup. Anywhere else the development token would be
 * refused by the API (or, worse, accepted), so a missing API_TOKEN is an error.
 */
export function resolveApiAccess(env: NodeJS.ProcessEnv): { baseUrl: string; token: string } | { error: string } {
  const baseUrl = env.API_URL || DEFAULT_API_URL;
  if (env.API_TOKEN) return { baseUrl, token: env.API_TOKEN };
  let host: string;
  try {
    host = new URL(baseUrl).hostname;
  } catch {
    return { error: `API_URL=${JSON.stringify(baseUrl)} is not a URL` };
  }
  if (isLoopbackHost(host)) return { baseUrl, token: DEV_API_TOKEN };
  return { error: `API_TOKEN is required: API_URL=${baseUrl} is not a loopback address (the development token is for loopback only)` };
}

function overview(): string {
  const width = Math.max(...COMMANDS.map((command) => command.name.length));
  return [
    'usage: cardpoller <command> [options]   (cardpoller <command> --help for its options)',
    '',
    ...COMMANDS.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    '',
    `environment: API_URL (default ${DEFAULT_API_URL}), API_TOKEN (bearer token; required unless API_URL is a loopback address)`,
  ].join('\n');
}

const help = (command: Command): string => `usage: cardpoller ${command.usage}\n\n${command.summary}`;

/** The longest command name that prefixes argv (`cards list` before `cards`). */
function findCommand(argv: readonly string[]): { command: Command; rest: string[] } | undefined {
  for (const words of [2, 1]) {
    const name = argv.slice(0, words).join(' ');
    const command = COMMANDS.find((candidate) => candidate.name === name);
    if (command) return { command, rest: argv.slice(words) };
  }
  return undefined;
}

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(`${overview()}\n`);
    return argv.length === 0 ? EXIT_USAGE : 0;
  }
  const found = findCommand(argv);
  if (!found) {
    // A group name alone (`cardpoller cards --help`) lists its subcommands.
    const group = COMMANDS.filter((command) => command.name.startsWith(`${argv[0]} `));
    if (group.length > 0) {
      process.stdout.write(`${group.map((command) => `usage: cardpoller ${command.usage}\n    ${command.summary}`).join('\n')}\n`);
      return argv.includes('--help') || argv.includes('-h') ? 0 : EXIT_USAGE;
    }
    process.stderr.write(`unknown command: ${argv.join(' ')}\n\n${overview()}\n`);
    return EXIT_USAGE;
  }
  const { command, rest } = found;
  let values: Values;
  let positionals: string[];
  try {
    const parsed = parseArgs({ args: rest, options: { ...command.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
    values = parsed.values;
    positionals = parsed.positionals;
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${help(command)}\n`);
    return EXIT_USAGE;
  }
  if (values.help === true) {
    process.stdout.write(`${help(command)}\n`);
    return 0;
  }
  if (positionals.length !== command.positionals) {
    process.stderr.write(`expected ${command.positionals} argument(s), got ${positionals.length}\n${help(command)}\n`);
    return EXIT_USAGE;
  }
  const access = resolveApiAccess(env);
  if ('error' in access) {
    process.stderr.write(`${access.error}\n`);
    return EXIT_USAGE;
  }
  const client = new ApiClient(access);
  try {
    const result = await command.run(client, positionals, values);
    process.stdout.write(`${typeof result === 'string' ? result : JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n${help(command)}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof ApiCallError) {
      process.stderr.write(
        `error: ${error.message}${error.field === undefined ? '' : ` (field: ${error.field})`} [${error.status || 'no answer'} ${error.code}]\n`,
      );
      return EXIT_API_ERROR;
    }
    throw error;
  }
}

// Run when executed directly (tsx src/cli/main.ts or bin/cardpoller.js), not when imported by tests.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
