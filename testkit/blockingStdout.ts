/**
 * Preloaded into every test file's process by testkit/runFiles.ts: makes the process' stdout — the
 * pipe its test results travel to the runner on — blocking.
 *
 * Why: runFiles runs files with `forceExit` (its file timeout), so a file's process exits as soon as
 * its tests end, and on Linux writes to a pipe are asynchronous: results still buffered at the exit
 * were lost. Tests that had run and passed were missing from the report, which still said `fail 0`
 * (CI run 73: 497 of 499 tests, the last two tests of test/unit/loops/schedulerState.test.ts
 * missing; nodejs/node#64833). A blocking pipe has nothing buffered when the process exits.
 */
interface PipeHandle {
  setBlocking?: (blocking: boolean) => unknown;
}

const handle = (process.stdout as unknown as { _handle?: PipeHandle })._handle;
handle?.setBlocking?.(true);
