/**
 * Workflow tests on the time-skipping test server: a server of their own per environment (a Java
 * process on a free port), so a workflow's one-second ticks, 30 s backoffs and 15 s retries pass as
 * fast as the workflow can run, and nothing is shared with the dev server the other tests use.
 *
 * Why the server is started here and not by `TestWorkflowEnvironment.createTimeSkipping`: the SDK
 * gives up when the server's port is not open within a few seconds, and a JVM starting while the
 * suite's other files load both cores can take that long. Here the wait is bounded generously and
 * the environment attaches to the running server with time skipping on, as createTimeSkipping's
 * own environment is (the same constructor, connections with the test service enabled).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { isTcpOpen, waitUntil } from '../devstack/process.js';
import { SEARCH_ATTRIBUTES } from '../src/workflow-safe/searchAttributes.js';
import { TEST_SERVER_JVM_OPTIONS, TEST_SERVER_MAIN_CLASS, ensureTestServer } from './testServer.js';
import { installQuietWorkerRuntime } from './isolatedStack.js';

/** Longest wait for the server's port; it opens in about a second on an idle machine. */
const START_TIMEOUT_MS = 60_000;
const HOST = '127.0.0.1';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => (address !== null && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts the installed server on `port`; its output is kept for the error of a failed start. */
function startServer(classPath: string, port: number): { process: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn('java', [...TEST_SERVER_JVM_OPTIONS, '-cp', classPath, TEST_SERVER_MAIN_CLASS, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { process: child, output: () => output, exited };
}

/** A time-skipping environment attached to a test server this helper started (and stops on teardown). */
export class TimeSkippingEnvironment extends TestWorkflowEnvironment {
  private serverProcess: ChildProcess | undefined;
  private serverExited: Promise<number | null> | undefined;
  /** How long the server took to open its port (ms). */
  startMs = 0;

  static async attach(address: string, namespace = 'default'): Promise<TimeSkippingEnvironment> {
    // The test service (time skipping) is enabled by this internal option, exactly as the SDK's own
    // createTimeSkipping sets it; it is not part of the public connection options.
    const internal = { [InternalConnectionOptionsSymbol]: { supportsTestService: true } };
    const nativeConnection = await NativeConnection.connect({ address, ...internal });
    const connection = await Connection.connect({ address, ...internal });
    // The workflows set the project's custom search attributes; the server refuses unknown ones.
    const { INDEXED_VALUE_TYPE_KEYWORD, INDEXED_VALUE_TYPE_KEYWORD_LIST } = proto.temporal.api.enums.v1.IndexedValueType;
    const types = { Keyword: INDEXED_VALUE_TYPE_KEYWORD, KeywordList: INDEXED_VALUE_TYPE_KEYWORD_LIST } as const;
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(Object.entries(SEARCH_ATTRIBUTES).map(([name, type]) => [name, types[type]])),
    });
    const options: TestWorkflowEnvironment['options'] = { client: {}, server: { type: 'existing' }, plugins: [] };
    return new TimeSkippingEnvironment(Runtime.instance(), options, true, 'existing', connection, nativeConnection, namespace, address);
  }

  override async teardown(): Promise<void> {
    await super.teardown();
    const child = this.serverProcess;
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise((resolve) => (timer = setTimeout(() => resolve('late'), 10_000)));
      const exited = await Promise.race([this.serverExited, late]);
      clearTimeout(timer);
      if (exited === 'late') child.kill('SIGKILL');
    }
  }

  /** @internal */
  own(child: ChildProcess, exited: Promise<number | null>, startMs: number): void {
    this.serverProcess = child;
    this.serverExited = exited;
    this.startMs = startMs;
  }
}

/**
 * A fresh time-skipping test server and an environment on it; installs the server on first use.
 * One per test file (or per test: a start costs about a second); call `teardown()` when done.
 */
export async function timeSkippingEnv(): Promise<TimeSkippingEnvironment> {
  // Before the first connection creates the SDK runtime: the failures workflow tests provoke are
  // their point, the worker's warnings about them noise.
  installQuietWorkerRuntime();
  const install = await ensureTestServer((line) => process.stderr.write(`${line}\n`));
  const port = await freePort();
  const started = Date.now();
  const server = startServer(install.classPath, port);
  let exitCode: number | null | undefined;
  void server.exited.then((code) => (exitCode = code));
  try {
    await waitUntil(
      `the time-skipping test server on port ${port}`,
      async () => {
        if (exitCode !== undefined) throw new Error(`the test server exited (code ${exitCode}): ${server.output()}`);
        return isTcpOpen(HOST, port);
      },
      START_TIMEOUT_MS,
    );
    // A test process that ends without teardown (a failed before hook, a signal) takes its server along.
    const killOnExit = (): void => void server.process.kill('SIGKILL');
    process.once('exit', killOnExit);
    void server.exited.then(() => process.off('exit', killOnExit));
    const env = await TimeSkippingEnvironment.attach(`${HOST}:${port}`);
    env.own(server.process, server.exited, Date.now() - started);
    return env;
  } catch (error) {
    server.process.kill('SIGKILL');
    throw error;
  }
}
