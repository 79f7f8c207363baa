/**
 * docker-compose.yml and the Dockerfile without Docker: every app command names a production
 * entry the build produces, every service the system needs is there with a health check and the
 * start order, and every variable given to our processes is one the config schema knows.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config/index.js';
import { assertSafeApiBinding } from '../../src/api/bindCheck.js';
import { appServices, dockerfileCmd, nodeEntry, readCompose, readDockerfile, ROOT } from './entries.js';
import { TEMPORAL_PRIORITY_DYNAMIC_CONFIG } from '../../devstack/temporal.js';

const WORKER_SERVICES: Readonly<Record<string, string>> = {
  'worker-control': 'dist/src/workers/control.js',
  'worker-card': 'dist/src/workers/card.js',
  'worker-gateway': 'dist/src/workers/gateway.js',
  'worker-ingest': 'dist/src/workers/ingest.js',
};

/** `dist/<path>.js` comes from `<path>.ts` compiled by tsconfig.build.json (rootDir: the project). */
function sourceOf(distEntry: string): string {
  const match = /^dist\/(.+)\.js$/.exec(distEntry);
  assert.ok(match?.[1], `${distEntry} is not a compiled entry under dist/`);
  return `${match[1]}.ts`;
}

function buildIncludes(): string[] {
  const tsconfig = JSON.parse(readFileSync(new URL('tsconfig.build.json', ROOT), 'utf8')) as {
    include: string[];
    compilerOptions: { outDir: string; rootDir: string };
  };
  assert.equal(tsconfig.compilerOptions.outDir, 'dist');
  assert.equal(tsconfig.compilerOptions.rootDir, '.');
  return tsconfig.include;
}

test('every compose command and the Dockerfile CMD run a compiled entry of the build', () => {
  const compose = readCompose();
  const includes = buildIncludes();
  const entries = appServices(compose).map(([name, service]) => [name, nodeEntry(service.command)] as const);
  entries.push(['Dockerfile CMD', nodeEntry(dockerfileCmd(readDockerfile()))]);
  for (const [name, entry] of entries) {
    const source = sourceOf(entry);
    assert.ok(existsSync(new URL(source, ROOT)), `${name}: ${entry} would come from ${source}, which does not exist`);
    assert.ok(
      includes.some((include) => source === include || source.startsWith(`${include}/`)),
      `${name}: ${source} is not compiled by tsconfig.build.json (include: ${includes.join(', ')})`,
    );
  }
});

test('compose runs every service the system needs, in order, with health checks', () => {
  const compose = readCompose();
  for (const name of ['postgres', 'redis', 'temporal', 'migrate', 'api', 'simulator', ...Object.keys(WORKER_SERVICES)]) {
    assert.ok(compose.services[name], `service ${name} is missing`);
  }
  for (const [name, entry] of Object.entries(WORKER_SERVICES))
    assert.equal(nodeEntry(compose.services[name]?.command), entry, `${name} runs one task queue's worker`);
  assert.equal(nodeEntry(compose.services.migrate?.command), 'dist/scripts/migrate.js');
  assert.equal(nodeEntry(compose.services.api?.command), 'dist/src/api/main.js');
  assert.equal(nodeEntry(compose.services.simulator?.command), 'dist/src/simulator/main.js');

  const redis = compose.services.redis?.command;
  assert.ok(Array.isArray(redis), 'redis runs with an explicit command');
  const flag = (name: string): string | undefined => (redis as string[])[(redis as string[]).indexOf(name) + 1];
  assert.equal(flag('--maxmemory-policy'), 'noeviction', 'leases must never be evicted');
  assert.equal(flag('--appendonly'), 'yes', 'AOF keeps claims and due times across restarts');

  const temporal = compose.services.temporal;
  assert.ok(
    temporal?.ports?.some((p) => p.endsWith(':8233')),
    'Temporal publishes its Web UI',
  );
  const attributes = [temporal?.command ?? []].flat().filter((arg) => arg.startsWith('--search-attribute='));
  for (const attribute of ['CardId', 'CarrierId', 'CheckTypes', 'Outcome', 'ClaimedBy', 'CardIds']) {
    assert.ok(
      attributes.some((arg) => arg.startsWith(`--search-attribute=${attribute}=`)),
      `Temporal registers search attribute ${attribute}`,
    );
  }

  // The dev server the project starts honours priority keys; the compose one must too.
  const dynamic = [temporal?.command ?? []].flat().filter((arg) => arg.startsWith('--dynamic-config-value='));
  for (const setting of TEMPORAL_PRIORITY_DYNAMIC_CONFIG) assert.ok(dynamic.includes(`--dynamic-config-value=${setting}`), `Temporal runs with ${setting}`);

  for (const [name, service] of Object.entries(compose.services)) {
    for (const port of service.ports ?? []) assert.match(port, /^127\.0\.0\.1:/, `${name}: port ${port} must bind to loopback`);
    if (name !== 'migrate') assert.ok(service.healthcheck?.test && !service.healthcheck.disable, `${name} has a health check`);
  }
  // App processes start only once what they need is healthy, and after the migrations ran.
  for (const [name, service] of appServices(compose)) {
    if (name === 'simulator') continue;
    const dependsOn = service.depends_on;
    assert.ok(dependsOn && !Array.isArray(dependsOn), `${name} has depends_on conditions`);
    const conditions = dependsOn as Record<string, { condition: string }>;
    assert.equal(conditions.postgres?.condition, 'service_healthy', `${name} waits for PostgreSQL`);
    if (name === 'migrate') continue;
    for (const dependency of ['redis', 'temporal']) assert.equal(conditions[dependency]?.condition, 'service_healthy', `${name} waits for ${dependency}`);
    assert.equal(conditions.migrate?.condition, 'service_completed_successfully', `${name} starts after the migrations`);
  }
  assert.equal(compose.services.migrate?.restart, 'no', 'migrate is one-shot');
});

test('compose gives our processes only variables the config schema knows, with valid values', () => {
  const compose = readCompose();
  const known = new Set(Object.keys(loadConfig({})));
  for (const [name, service] of appServices(compose)) {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(service.environment ?? {})) {
      assert.ok(known.has(key), `${name}: ${key} is not a setting of src/config/index.ts`);
      // `${VAR:-default}` as Compose expands it when VAR is unset.
      env[key] = String(value ?? '').replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
    }
    assert.doesNotThrow(() => loadConfig(env), `${name}: its environment must pass the config schema`);
  }
  // The API binds 0.0.0.0 in the image: compose must not hand it the development token.
  const apiEnv = Object.fromEntries(
    Object.entries(compose.services.api?.environment ?? {}).map(([key, value]) => [key, String(value ?? '').replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')]),
  );
  const apiHost = /API_HOST=(\S+)/.exec(readDockerfile())?.[1];
  assert.equal(apiHost, '0.0.0.0');
  assert.doesNotThrow(() => assertSafeApiBinding(loadConfig({ ...apiEnv, API_HOST: apiHost })), 'compose API: a token other than the development one');
  // Worker health checks probe readiness on the port the image configures; the image's own check,
  // liveness (an orchestrator replacing unhealthy containers must not do so in an outage).
  const image = readDockerfile();
  const port = /WORKER_METRICS_PORT=(\d+)/.exec(image)?.[1];
  assert.ok(port, 'the image sets WORKER_METRICS_PORT');
  for (const name of Object.keys(WORKER_SERVICES)) {
    assert.ok(JSON.stringify(compose.services[name]?.healthcheck?.test).includes(`:${port}/readyz`), `${name} probes /readyz on ${port}`);
  }
  assert.ok(JSON.stringify(compose.services.api?.healthcheck?.test).includes(':8080/readyz'), 'the API probes /readyz');
  const healthcheck = /^HEALTHCHECK (?:.*\\\n)*.*$/m.exec(image)?.[0] ?? '';
  assert.ok(healthcheck.includes(`:${port}/livez`), `the image checks /livez on ${port}: ${healthcheck}`);
});

test('the Dockerfile builds in one stage and runs from a slim stage as a non-root user', () => {
  const dockerfile = readDockerfile();
  const stages = [...dockerfile.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)].map((m) => ({ image: m[1] ?? '', name: m[2] ?? '' }));
  assert.ok(stages.length >= 2, 'multi-stage');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  assert.match(stages.at(-1)?.image ?? '', /slim|alpine|distroless/, 'the runtime stage is slim');
  assert.match(dockerfile, /RUN npm run build/, 'the build stage runs the build');
  assert.match(runtime, /^COPY --from=\S+ \/app\/dist /m, 'the runtime stage takes the build output');
  assert.doesNotMatch(runtime, /^COPY \. /m, 'the runtime stage copies no sources');
  const user = /^USER\s+(\S+)/m.exec(runtime)?.[1];
  assert.ok(user && user !== 'root' && user !== '0', `runtime runs as a non-root user (USER ${user})`);
  assert.match(runtime, /^HEALTHCHECK /m);
  assert.deepEqual(dockerfileCmd(dockerfile).slice(0, 1), ['node'], 'CMD runs node directly (signals reach the process)');
});

test('.dockerignore keeps machine-local and generated folders out of the build context', () => {
  const ignored = readFileSync(new URL('.dockerignore', ROOT), 'utf8')
    .split('\n')
    .map((line) => line.trim());
  for (const entry of ['node_modules', '.data', '.tools', 'dist', 'test-results', '.git']) assert.ok(ignored.includes(entry), `.dockerignore lists ${entry}`);
});
