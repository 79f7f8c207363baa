/**
 * The Temporal cluster's config files (devstack/temporalCluster.ts) hold exactly the objects the
 * code builds: read back with a YAML parser, they equal them, whatever the strings hold.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/index.js';
import {
  CLUSTER_SERVICES,
  clusterOptions,
  dynamicConfig,
  serviceConfig,
  servicePid,
  startedProcessAlive,
  writeClusterConfigs,
} from '../../devstack/temporalCluster.js';

test('cluster config files parse back to the objects written, strings stay strings, service files are private', () => {
  const dir = mkdtempSync(join(tmpdir(), 'temporal-cluster-config-'));
  try {
    const base = clusterOptions(loadConfig({}));
    // A password a naive YAML writer would garble: quotes, a comment mark, a colon.
    const options = { ...base, dir, postgres: { ...base.postgres, password: 'p@ss: "x" #1' } };
    const files = writeClusterConfigs(options);
    const dynamicConfigFile = join(dir, 'config', 'dynamicconfig.yaml');
    assert.deepEqual(parse(readFileSync(dynamicConfigFile, 'utf8')), dynamicConfig());
    assert.deepEqual(Object.keys(files).sort(), [...CLUSTER_SERVICES].sort());
    for (const service of CLUSTER_SERVICES) {
      const text = readFileSync(files[service], 'utf8');
      assert.deepEqual(parse(text), serviceConfig(options, service, dynamicConfigFile), service);
      assert.equal(statSync(files[service]).mode & 0o777, 0o600, `${service}: holds the password, owner only`);
    }
    // One a YAML 1.1 parser would read as a number unless quoted.
    const numeric = { ...options, postgres: { ...options.postgres, password: '0x1f' } };
    writeClusterConfigs(numeric);
    const stored = parse(readFileSync(files.frontend, 'utf8')) as { persistence: { datastores: Record<string, { sql: { password: unknown } }> } };
    assert.equal(stored.persistence.datastores['postgres-default']?.sql.password, '0x1f');
    assert.match(readFileSync(files.frontend, 'utf8'), /password: "0x1f"/, 'quoted, so no YAML version reads it as a number');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a service process not yet exec’d is starting, not gone: alive until it exits (CI: history started twice)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'temporal-cluster-pid-'));
  // Between fork and exec a spawned server's command line is still its parent's: a process that is
  // not the server binary stands in for it here.
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  try {
    const options = { ...clusterOptions(loadConfig({})), dir };
    writeFileSync(join(dir, 'history.pid'), String(child.pid));
    assert.equal(servicePid(options, 'history'), undefined, 'not (yet) our server by its command line');
    assert.equal(startedProcessAlive(options, 'history'), true, 'but alive: waiting for it, not starting another');
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    assert.equal(startedProcessAlive(options, 'history'), false, 'gone once it exited');
    rmSync(join(dir, 'history.pid'));
    assert.equal(startedProcessAlive(options, 'history'), false, 'no pid file: nothing started');
  } finally {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
