/**
 * The Temporal time-skipping test server (the Java SDK's `io.temporal:temporal-test-server`), pinned
 * and installed into the user's cache (`~/.cache/card-poller/`, devstack/paths.ts: every clone uses
 * the one install; a fresh clone's `npm test` spent ~15 s of CPU in Maven) on first use. The SDK would download its own build at run time, which
 * this machine cannot; Maven Central has the same server as a Java library, so `mvn` copies its jars
 * (scripts/test-server/pom.xml) and the workflow tests start it with the local `java`.
 *
 * Layout of an install (`~/.cache/card-poller/temporal-test-server/<version>/`): `lib/*.jar`, `classpath.txt`
 * (the jars, relative to the install) and `test-server`, a wrapper script taking the port as its
 * argument (what `TestWorkflowEnvironment.createTimeSkipping`'s `existing-path` executable expects).
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, userCacheDir } from '../devstack/paths.js';

const execFileAsync = promisify(execFile);

/** Also in scripts/test-server/pom.xml (`temporal.test-server.version`): change both together. */
export const TEST_SERVER_VERSION = '1.31.0';
const POM = join(PROJECT_ROOT, 'scripts', 'test-server', 'pom.xml');
const INSTALLS = join(userCacheDir(), 'temporal-test-server');
export const TEST_SERVER_DIR = join(INSTALLS, TEST_SERVER_VERSION);
const CLASSPATH_FILE = 'classpath.txt';
export const TEST_SERVER_MAIN_CLASS = 'io.temporal.testserver.TestServer';
/**
 * JVM options for a short-lived test server: start-up time matters more than peak speed, and a few
 * hundred workflows fit in a small heap.
 */
export const TEST_SERVER_JVM_OPTIONS: readonly string[] = ['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-Xss512k', '-Xmx512m'];

export interface TestServerInstall {
  /** The install directory (`~/.cache/card-poller/temporal-test-server/<version>`). */
  readonly dir: string;
  /** Absolute class path of the server's jars. */
  readonly classPath: string;
  /** The wrapper script (`<dir>/test-server <port>`). */
  readonly wrapper: string;
  /** Milliseconds the install took now; 0 when it was already there. */
  readonly installedInMs: number;
}

function readInstall(dir: string, installedInMs: number): TestServerInstall | undefined {
  const classPathFile = join(dir, CLASSPATH_FILE);
  const wrapper = join(dir, 'test-server');
  if (!existsSync(classPathFile) || !existsSync(wrapper)) return undefined;
  const entries = readFileSync(classPathFile, 'utf8').trim().split(':').filter(Boolean);
  if (entries.length === 0 || !entries.every((entry) => existsSync(join(dir, entry)))) return undefined;
  return { dir, classPath: entries.map((entry) => join(dir, entry)).join(':'), wrapper, installedInMs };
}

const WRAPPER = `#!/bin/sh
# The Temporal time-skipping test server of this install; argument: the port to listen on.
dir=$(cd "$(dirname "$0")" && pwd -P)
cp=$(sed "s#[^:][^:]*#$dir/&#g" "$dir/${CLASSPATH_FILE}")
exec java ${TEST_SERVER_JVM_OPTIONS.join(' ')} $JAVA_OPTS -cp "$cp" ${TEST_SERVER_MAIN_CLASS} "$@"
`;

async function requireTool(command: string, args: readonly string[], why: string): Promise<void> {
  try {
    await execFileAsync(command, [...args]);
  } catch (error) {
    throw new Error(`The time-skipping test server needs \`${command}\` (${why}): ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * The installed test server; installs it first when missing (Maven Central, a few seconds). Safe
 * when several test processes call it at once: each installs into a directory of its own and the
 * first rename wins.
 */
export async function ensureTestServer(log: (line: string) => void = () => undefined): Promise<TestServerInstall> {
  const existing = readInstall(TEST_SERVER_DIR, 0);
  if (existing) return existing;
  const started = Date.now();
  await requireTool('java', ['-version'], 'a Java 11+ runtime runs it');
  await requireTool('mvn', ['-v'], 'Maven fetches its jars from Maven Central');
  log(`installing temporal-test-server ${TEST_SERVER_VERSION} into ${TEST_SERVER_DIR}`);
  mkdirSync(INSTALLS, { recursive: true });
  const staging = join(INSTALLS, `.install-${process.pid}-${Date.now()}`);
  try {
    await execFileAsync('mvn', ['-q', '-B', '-f', POM, 'dependency:copy-dependencies', '-DincludeScope=runtime', `-DoutputDirectory=${join(staging, 'lib')}`], {
      maxBuffer: 16 * 1024 * 1024,
    });
    const jars = readdirSync(join(staging, 'lib')).filter((name) => name.endsWith('.jar'));
    if (!jars.some((name) => name.startsWith(`temporal-test-server-${TEST_SERVER_VERSION}`)))
      throw new Error(`mvn did not copy temporal-test-server-${TEST_SERVER_VERSION}.jar (got ${jars.join(', ')})`);
    writeFileSync(join(staging, CLASSPATH_FILE), `${jars.map((name) => `lib/${name}`).join(':')}\n`);
    writeFileSync(join(staging, 'test-server'), WRAPPER);
    chmodSync(join(staging, 'test-server'), 0o755);
    try {
      renameSync(staging, TEST_SERVER_DIR);
    } catch (error) {
      // Another process installed it meanwhile: use theirs.
      if (!readInstall(TEST_SERVER_DIR, 0)) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  const installed = readInstall(TEST_SERVER_DIR, Date.now() - started);
  if (!installed) throw new Error(`temporal-test-server install in ${TEST_SERVER_DIR} is incomplete`);
  log(`installed temporal-test-server ${TEST_SERVER_VERSION} in ${installed.installedInMs} ms`);
  return installed;
}
