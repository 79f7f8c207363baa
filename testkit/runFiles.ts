/**
 * Runs test files in the order given, N at a time, each in a process of its own — what
 * `node --test --test-concurrency=N` does, except that the runner sorts the files it is given by
 * path, and the suite wants its longest files started first (so the pool does not end on one of
 * them while the other slots idle). Reports on stdout as the runner does (spec), and with
 * `--times FILE` writes each file's time, the slowest first: where the minutes go.
 *
 * With `--failures FILE` it writes each failed test (file, name, the assertion's message) there too:
 * a log that shows only its end (a CI summary) then still says why a test failed, not just which.
 *
 * With `--file-timeout SECONDS` a test still running after that long fails (node:test's `timeout`,
 * which the file's tests inherit) and the file's process then ends even if a hung cleanup holds it.
 *
 * Usage: node <TypeScript loader options> testkit/runFiles.ts [--concurrency N] [--times FILE] [--failures FILE]
 *          [--file-timeout SECONDS] [--test-name-pattern=RE]... [--test-only] -- FILE...
 * The files' processes get this process' Node options (`--import tsx`, or Node's own type transform
 * with devstack/tsLoader.ts as scripts/test.sh runs it).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

interface Options {
  concurrency: number;
  times: string | undefined;
  failures: string | undefined;
  testNamePatterns: string[];
  only: boolean;
  /** Seconds a test may run before it fails and its file's process is ended (undefined = no bound). */
  fileTimeoutSec: number | undefined;
  files: string[];
}

function parse(args: readonly string[]): Options {
  const options: Options = { concurrency: 1, times: undefined, failures: undefined, testNamePatterns: [], only: false, fileTimeoutSec: undefined, files: [] };
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] ?? '';
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = (): string => {
      const next = inline ?? args[(i += 1)];
      if (next === undefined) throw new Error(`${flag} needs a value`);
      return next;
    };
    if (flag === '--') {
      options.files.push(...args.slice(i + 1));
      break;
    } else if (flag === '--concurrency') options.concurrency = Number(value());
    else if (flag === '--times') options.times = value();
    else if (flag === '--failures') options.failures = value();
    else if (flag === '--test-name-pattern') options.testNamePatterns.push(value());
    else if (flag === '--test-only') options.only = true;
    else if (flag === '--file-timeout') options.fileTimeoutSec = Number(value());
    else throw new Error(`unknown option ${arg} (files go after --)`);
  }
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new Error('--concurrency must be a whole number ≥ 1');
  if (options.fileTimeoutSec !== undefined && !(options.fileTimeoutSec > 0)) throw new Error('--file-timeout must be a number of seconds > 0');
  if (options.files.length === 0) throw new Error('no test files given (after --)');
  return options;
}

const options = parse(process.argv.slice(2));
const began = Date.now();
const fileTimes = new Map<string, number>();
const stream = run({
  files: options.files,
  // Each file's stdout blocking, so `forceExit` cannot drop its last results (testkit/blockingStdout.ts).
  execArgv: ['--import', new URL('./blockingStdout.ts', import.meta.url).href],
  concurrency: options.concurrency,
  ...(options.testNamePatterns.length > 0 ? { testNamePatterns: options.testNamePatterns } : {}),
  ...(options.only ? { only: true } : {}),
  // A file that hangs (a cleanup waiting for ever after a failure) fails alone instead of holding
  // the whole run until CI's own limit
  // (the test fails at the bound; `forceExit` then ends its process though the hung cleanup holds it).
  ...(options.fileTimeoutSec === undefined ? {} : { timeout: options.fileTimeoutSec * 1000, forceExit: true }),
});
const failures: string[] = [];
stream.on('test:fail', (data: { name: string; file?: string; todo?: boolean | string; details: { error: unknown } }) => {
  if (data.todo !== undefined && data.todo !== false) return;
  process.exitCode = 1;
  const where = data.file === undefined ? '' : `${relative(process.cwd(), data.file)}: `;
  failures.push(`✖ ${where}${data.name}\n${indent(failureText(data.details.error))}`);
});
// A file's own entry: named by its path (as given), at the top level; its duration is its process' run.
stream.on('test:complete', (data: { name: string; file?: string; nesting: number; details: { duration_ms: number } }) => {
  if (data.nesting === 0 && data.file !== undefined && resolve(data.name) === data.file) fileTimes.set(data.file, data.details.duration_ms);
});
/** The runner wraps a test's error (`ERR_TEST_FAILURE`); what the test threw is its cause. */
function failureText(error: unknown): string {
  const thrown = error instanceof Error && error.cause !== undefined ? error.cause : error;
  const text = thrown instanceof Error ? (thrown.stack ?? `${thrown.name}: ${thrown.message}`) : String(thrown);
  // The message and the first frames are what says why; a whole stack of an SDK call is noise here.
  return text.split('\n').slice(0, 40).join('\n').slice(0, 6_000);
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}

function write(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

stream.on('end', () => {
  if (options.failures !== undefined) write(options.failures, failures.length === 0 ? '' : `${failures.length} failed\n${failures.join('\n')}\n`);
  if (options.times === undefined) return;
  const rows = [...fileTimes].sort((a, b) => b[1] - a[1]);
  const sum = rows.reduce((total, [, ms]) => total + ms, 0);
  const lines = [
    `${rows.length} test files in ${((Date.now() - began) / 1000).toFixed(0)} s, ${options.concurrency} at a time (the files' times add up to ${(sum / 1000).toFixed(0)} s)`,
    ...rows.map(([file, ms]) => `${(ms / 1000).toFixed(1).padStart(7)} s  ${relative(process.cwd(), file)}`),
  ];
  write(options.times, `${lines.join('\n')}\n`);
});
// Spec everywhere, as `node --test` reports since Node 23: it ends with the failed tests and their
// errors, which TAP leaves scattered through the log.
stream.compose(spec).pipe(process.stdout);
