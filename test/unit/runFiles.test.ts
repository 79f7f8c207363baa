/**
 * The suite's runner (testkit/runFiles.ts) reports every test its files ran. With its file timeout it
 * runs files with `forceExit`, and a file's process that exits while its last results sit in the
 * stdout pipe lost them: CI runs 73 and 74 reported 497 of 499 tests with `fail 0`, and this test's
 * files lost 95–118 of 2 000 results per run before testkit/blockingStdout.ts (nodejs/node#64833).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const FILES = 40;
/** Flags node:test gives its files' processes (coverage, concurrency, inspector): not for a runner of its own. */
const TEST_PROCESS_FLAG = /^--(test|inspect)/;
const TESTS_PER_FILE = 50;

test(`the runner reports all ${FILES * TESTS_PER_FILE} tests of ${FILES} quick files run with its file timeout`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'run-files-'));
  try {
    const files: string[] = [];
    for (let f = 0; f < FILES; f++) {
      const file = join(dir, `f${f}.test.mjs`);
      // Long names: more bytes per result, as in the suite's own files.
      const tests = Array.from({ length: TESTS_PER_FILE }, (_, i) => `test('file ${f} test ${i} ${'x'.repeat(300)}', () => {});`);
      writeFileSync(file, `import { test } from 'node:test';\n${tests.join('\n')}\n`);
      files.push(file);
    }
    const runner = fileURLToPath(new URL('../../testkit/runFiles.ts', import.meta.url));
    // This process' Node options (the TypeScript loader) run the runner as scripts/test.sh does.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...process.execArgv.filter((flag) => !TEST_PROCESS_FLAG.test(flag)), runner, '--concurrency', '3', '--file-timeout', '300', '--', ...files],
      {
        maxBuffer: 64 * 1024 * 1024,
        // Not as a child of this test run: node:test marks its files' processes with this variable.
        env: Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'NODE_TEST_CONTEXT')),
      },
    );
    const reported = Number(/^ℹ tests (\d+)$/m.exec(stdout)?.[1]);
    const passed = Number(/^ℹ pass (\d+)$/m.exec(stdout)?.[1]);
    t.diagnostic(`reported ${reported} tests, ${passed} passed`);
    if (!(reported > 0)) t.diagnostic(stdout.slice(-2000));
    assert.equal(reported, FILES * TESTS_PER_FILE, 'tests reported');
    assert.equal(passed, FILES * TESTS_PER_FILE, 'tests passed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
