/**
 * The Helm chart (deploy/helm/card-poller): `helm lint --strict` and `helm template` for every value
 * set in its ci/ folder, each rendered object valid against the strict Kubernetes schemas
 * (scripts/chartCheck.ts; the pinned tools install into .tools/ on first use), and what the chart
 * must say: one Deployment per worker kind and the API with probes, resources and a
 * PodDisruptionBudget, a shutdown grace covering the workers' drain, the migration as a hook Job,
 * configuration from a ConfigMap and a Secret that the config schema accepts.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema, loadConfig } from '../../src/config/index.js';
import { WORKER_KINDS } from '../../src/workers/createWorker.js';
import { checkChart, problems, valueSets, type RenderedObject, type ValueSetResult } from '../../scripts/chartCheck.js';

interface Container {
  name: string;
  command: string[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  startupProbe?: { httpGet?: { path: string } };
  livenessProbe?: { httpGet?: { path: string } };
  readinessProbe?: { httpGet?: { path: string } };
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  containers: Container[];
}
type Deployment = RenderedObject & { spec: { replicas: number; selector: { matchLabels: Record<string, string> }; template: { spec: PodSpec } } };
type Pdb = RenderedObject & { spec: { selector: { matchLabels: Record<string, string> } } };

let results: Map<string, ValueSetResult>;

/** Extra value sets written here: ones that must fail, and one proving the schemas are strict. */
function tempValues(values: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'chart-values-')), 'values.yaml');
  writeFileSync(file, values);
  return file;
}

before(async () => {
  const sets = {
    ...valueSets(),
    'no-token': tempValues('api: {}\n'),
    'dev-token': tempValues('api: { token: dev-token-change-me }\n'),
    'bad-redis-mode': tempValues('api: { token: ci-secret-token }\nredis: { mode: sentinel }\n'),
    'values-typo': tempValues('api: { token: ci-secret-token }\nworkers: { crad: { replicas: 2 } }\n'),
    'unknown-field': tempValues('api: { token: ci-secret-token }\nsecurityContext: { notAField: true }\n'),
  };
  results = new Map((await checkChart(sets)).map((result) => [result.name, result]));
});

const CI_SETS = ['default', 'cluster', 'existing-secret'];

function objects(set: string): RenderedObject[] {
  const result = results.get(set);
  assert.ok(result, set);
  return result.objects.map((entry) => entry);
}
const ofKind = <T extends RenderedObject>(set: string, kind: string): T[] => objects(set).filter((entry) => entry.object.kind === kind) as T[];
const deployment = (set: string, name: string): Deployment['object'] & Deployment => {
  const found = ofKind<Deployment>(set, 'Deployment').find((entry) => entry.object.metadata.name === `cp-card-poller-${name}`);
  assert.ok(found, `${set}: Deployment ${name}`);
  return found.object as Deployment['object'] & Deployment;
};

test('every value set lints clean and renders objects valid against the strict Kubernetes schemas', () => {
  for (const set of CI_SETS) {
    const result = results.get(set);
    assert.ok(result, `value set ${set} was checked`);
    assert.deepEqual(problems(result), [], `${set}: lint, render and schema problems`);
    assert.ok(result.objects.length >= 13, `${set}: ${result.objects.length} objects`);
  }
});

test('the schemas are strict: an unknown field is an error', () => {
  const result = results.get('unknown-field')!;
  assert.equal(result.renderError, null);
  assert.ok(
    result.objects.some((entry) => entry.schemaErrors.some((error) => error.includes('notAField'))),
    JSON.stringify(problems(result)),
  );
});

test('values.schema.json: a misspelt value is an error of lint and render, naming it', () => {
  const result = results.get('values-typo')!;
  assert.ok(
    result.lint.some((line) => line.startsWith('[ERROR]') && line.includes('crad')),
    result.lint.join('\n'),
  );
  assert.match(result.renderError ?? '', /crad/);
});

test('a missing or development API token, or an unknown Redis mode, stops the render with a message naming the value', () => {
  assert.match(results.get('no-token')!.renderError ?? '', /api\.token is required/);
  assert.match(results.get('dev-token')!.renderError ?? '', /api\.token must not be the development token/);
  assert.match(results.get('bad-redis-mode')!.renderError ?? '', /at '\/redis\/mode': value must be one of 'single', 'cluster'/);
});

test('one Deployment per worker kind and the API, each with resources, probes and a PodDisruptionBudget', () => {
  for (const set of CI_SETS) {
    const pdbs = ofKind<Pdb>(set, 'PodDisruptionBudget').map((entry) => (entry.object as unknown as Pdb['object'] & Pdb).spec.selector.matchLabels);
    for (const name of [...WORKER_KINDS.map((kind) => `worker-${kind}`), 'api']) {
      const spec = deployment(set, name).spec;
      const container = spec.template.spec.containers[0];
      assert.ok(container, `${set} ${name}: a container`);
      const entry = name === 'api' ? 'dist/src/api/main.js' : `dist/src/workers/${name.slice('worker-'.length)}.js`;
      assert.deepEqual(container.command, ['node', entry], `${set} ${name}: runs ${entry}`);
      assert.ok(container.resources?.requests?.cpu && container.resources.requests.memory && container.resources.limits?.memory, `${set} ${name}: resources`);
      assert.equal(container.livenessProbe?.httpGet?.path, '/livez', `${set} ${name}: liveness on /livez`);
      assert.equal(container.readinessProbe?.httpGet?.path, '/readyz', `${set} ${name}: readiness on /readyz`);
      // Workers wait through their start (bundle, connections) on liveness; the API starts at once.
      assert.equal(container.startupProbe?.httpGet?.path, name === 'api' ? undefined : '/livez', `${set} ${name}: start-up probe`);
      assert.deepEqual(
        container.envFrom?.map((source) => Object.keys(source)[0]),
        ['configMapRef', 'secretRef'],
        `${set} ${name}: configuration from the ConfigMap and the Secret`,
      );
      assert.ok(
        pdbs.some((labels) => JSON.stringify(labels) === JSON.stringify(spec.selector.matchLabels)),
        `${set} ${name}: a PodDisruptionBudget selects its pods`,
      );
    }
  }
});

test("a worker pod's termination grace covers WORKER_SHUTDOWN_GRACE_MS, and CARD_WORKER_COUNT is the card replicas", () => {
  for (const set of CI_SETS) {
    const config = configOf(set);
    for (const kind of WORKER_KINDS) {
      const grace = deployment(set, `worker-${kind}`).spec.template.spec.terminationGracePeriodSeconds ?? 30;
      assert.ok(grace * 1000 >= config.WORKER_SHUTDOWN_GRACE_MS + 10_000, `${set} ${kind}: ${grace} s for a ${config.WORKER_SHUTDOWN_GRACE_MS} ms drain`);
    }
    assert.equal(config.CARD_WORKER_COUNT, deployment(set, 'worker-card').spec.replicas, set);
  }
  assert.equal(deployment('cluster', 'worker-card').spec.template.spec.terminationGracePeriodSeconds, 46 + 20);
});

/** The environment a pod gets (ConfigMap, then the chart's Secret when it makes one), through the config schema. */
function configOf(set: string): ReturnType<typeof loadConfig> {
  const data = (kind: string, name: string): Record<string, string> => {
    const found = objects(set).find((entry) => entry.object.kind === kind && entry.object.metadata.name === name)?.object as
      { data?: Record<string, string>; stringData?: Record<string, string> } | undefined;
    return { ...(found?.data ?? {}), ...(found?.stringData ?? {}) };
  };
  const env = { ...data('ConfigMap', 'cp-card-poller-env'), ...data('Secret', 'cp-card-poller-env') };
  const known = new Set(Object.keys(configSchema.shape));
  for (const key of Object.keys(env)) assert.ok(known.has(key), `${set}: ${key} is not a setting of src/config/index.ts`);
  return loadConfig(env);
}

test('the ConfigMap and Secret hold only settings the config schema knows, with valid values', () => {
  const defaults = configOf('default');
  assert.equal(defaults.API_TOKEN, 'ci-secret-token');
  assert.equal(defaults.REDIS_CLUSTER_NODES, undefined);
  assert.equal(defaults.DATABASE_URL, 'postgres://cardpoller@postgresql.postgresql.svc.cluster.local:5432/cardpoller');
  const cluster = configOf('cluster');
  assert.deepEqual(
    cluster.REDIS_CLUSTER_NODES?.map((node) => `${node.host}:${node.port}`),
    ['redis-0.redis:6379', 'redis-1.redis:6379', 'redis-2.redis:6379'],
  );
  assert.equal(cluster.REDIS_EVICTION_CHECK, 'off');
  assert.equal(cluster.TEMPORAL_NAMESPACE, 'card-poller-prod');
  assert.equal(cluster.DATABASE_POOL_SIZE, 10);
  assert.equal(cluster.CARD_RUN_SHAPE, 'batch');
  // Credentials managed elsewhere: the chart makes no Secret but points every pod at that one.
  assert.equal(ofKind('existing-secret', 'Secret').length, 0);
  const api = deployment('existing-secret', 'api').spec.template.spec.containers[0];
  assert.equal(api?.envFrom?.[1]?.secretRef?.name, 'card-poller-credentials');
});

test('the migrations run as a pre-install/pre-upgrade hook Job, before the workers start', () => {
  for (const set of CI_SETS) {
    const job = ofKind(set, 'Job').find((entry) => entry.object.metadata.name === 'cp-card-poller-migrate')?.object as
      (RenderedObject['object'] & { spec: { template: { spec: PodSpec } } }) | undefined;
    assert.ok(job, `${set}: a migration Job`);
    assert.equal(job.metadata.annotations?.['helm.sh/hook'], 'pre-install,pre-upgrade');
    assert.deepEqual(job.spec.template.spec.containers[0]?.command, ['node', 'dist/scripts/migrate.js']);
  }
});

test('temporal.setupSearchAttributes adds a hook Job that runs temporal:setup on the configured namespace', () => {
  const names = (set: string): string[] => ofKind(set, 'Job').map((entry) => entry.object.metadata.name);
  assert.ok(!names('default').includes('cp-card-poller-temporal-setup'), 'off by default');
  const job = ofKind('cluster', 'Job').find((entry) => entry.object.metadata.name === 'cp-card-poller-temporal-setup')?.object as
    (RenderedObject['object'] & { spec: { template: { spec: PodSpec } } }) | undefined;
  assert.ok(job, 'cluster: the temporal-setup Job');
  assert.equal(job.metadata.annotations?.['helm.sh/hook'], 'pre-install,pre-upgrade');
  assert.deepEqual(job.spec.template.spec.containers[0]?.command, [
    'node',
    'dist/scripts/temporalSetup.js',
    '--address',
    'temporal.example.internal:7233',
    '--namespace',
    'card-poller-prod',
  ]);
});
