/**
 * The Grafana dashboard's shape: valid JSON, unique panel ids, every query with a data source and
 * a refId, only template variables it defines, and every PromQL expression accepted by promtool
 * (each becomes a recording rule of a throw-away rule file, Grafana's variables replaced by values).
 * Which metrics the expressions read is checked against a running stack in servedMetrics.test.ts.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { ensurePromtool } from '../../devstack/promtool.js';
import { DASHBOARD_PATH, dashboardExpressions } from '../ops/deployExpressions.js';

const execFileAsync = promisify(execFile);

interface Target {
  readonly refId?: string;
  readonly expr?: string;
  readonly datasource?: { uid?: string };
}
interface Panel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly datasource?: { uid?: string };
  readonly targets?: Target[];
  readonly panels?: Panel[];
}
interface Dashboard {
  readonly uid?: string;
  readonly title?: string;
  readonly panels: Panel[];
  readonly templating: { list: { name: string }[] };
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as Dashboard;
const allPanels = (panels: readonly Panel[]): Panel[] => panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);

/** Grafana's built-in variables and the dashboard's own, replaced by values PromQL accepts. */
function substituted(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$\{__range\}|\$__range/g, '5m').replace(/\$\{?(\w+)\}?/g, '.*');
}

let promtool = '';
before(async () => {
  promtool = await ensurePromtool((line) => process.stderr.write(`${line}\n`));
});

test('the dashboard: unique panel ids, a data source and refId on every query, only variables it defines', () => {
  const board = dashboard();
  assert.equal(board.uid, 'card-poller');
  const panels = allPanels(board.panels);
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  const defined = new Set(board.templating.list.map((v) => v.name));
  for (const panel of panels.filter((p) => p.type !== 'row')) {
    assert.ok((panel.targets ?? []).length > 0, `panel "${panel.title}" has queries`);
    assert.equal(panel.datasource?.uid, '${datasource}', `panel "${panel.title}" uses the dashboard's data source`);
    const refIds = (panel.targets ?? []).map((t) => t.refId);
    assert.equal(new Set(refIds).size, refIds.length, `panel "${panel.title}" has unique refIds`);
    for (const target of panel.targets ?? []) {
      assert.ok(target.expr, `panel "${panel.title}" ${target.refId}: an expression`);
      for (const used of target.expr.matchAll(/\$\{?(\w+)\}?/g)) {
        const name = used[1] ?? '';
        assert.ok(name.startsWith('__') || defined.has(name), `panel "${panel.title}": variable $${name} is defined`);
      }
    }
  }
});

test('promtool accepts every dashboard expression as PromQL', async (t) => {
  const expressions = dashboardExpressions().filter((e) => !e.expr.startsWith('label_values('));
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-promql-'));
  try {
    const rules = expressions.map((e, i) => ({ record: `dashboard:expression_${i}`, expr: substituted(e.expr) }));
    writeFileSync(join(dir, 'dashboard.yml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
    const result = await execFileAsync(promtool, ['check', 'rules', 'dashboard.yml'], { cwd: dir }).then(
      ({ stdout, stderr }) => ({ ok: true, output: stdout + stderr }),
      (error: { stdout?: string; stderr?: string; message: string }) => ({ ok: false, output: `${error.stdout ?? ''}${error.stderr ?? error.message}` }),
    );
    for (const line of result.output.trim().split('\n')) t.diagnostic(line);
    assert.ok(result.ok, result.output);
    assert.match(result.output, new RegExp(`SUCCESS: ${expressions.length} rules found`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
