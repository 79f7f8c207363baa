/**
 * The Prometheus alert rules: `promtool check rules` accepts them, `promtool test rules` passes
 * their unit tests, and every alert has a runbook line and is unit-tested both firing and not
 * firing. promtool comes from Debian's prometheus package (devstack/promtool.ts).
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { ensurePromtool } from '../../devstack/promtool.js';
import { ALERTS_PATH } from '../ops/deployExpressions.js';

const execFileAsync = promisify(execFile);
const RULES_DIR = dirname(ALERTS_PATH);
const TESTS_PATH = join(RULES_DIR, 'alerts.test.yml');

interface Rule {
  readonly alert?: string;
  readonly annotations?: Record<string, string>;
}
interface RuleTest {
  readonly alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[];
}

let promtool = '';

before(async () => {
  promtool = await ensurePromtool((line) => process.stderr.write(`${line}\n`));
});

/** promtool's output, whether it succeeded or not, with its exit status. */
async function run(...args: string[]): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(promtool, args, { cwd: RULES_DIR });
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? failed.message}` };
  }
}

const alerts = (): Rule[] => (parse(readFileSync(ALERTS_PATH, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

test('promtool check rules accepts alerts.yml', async (t) => {
  const result = await run('check', 'rules', 'alerts.yml');
  for (const line of result.output.trim().split('\n')) t.diagnostic(line);
  assert.ok(result.ok, result.output);
  assert.match(result.output, /SUCCESS: \d+ rules found/);
});

test('promtool test rules passes alerts.test.yml', async (t) => {
  const result = await run('test', 'rules', 'alerts.test.yml');
  for (const line of result.output.trim().split('\n')) t.diagnostic(line);
  assert.ok(result.ok, result.output);
  assert.match(result.output, /SUCCESS/);
});

test('every alert has a summary and a runbook line', () => {
  for (const rule of alerts()) {
    assert.ok(rule.alert, 'only alerting rules in alerts.yml');
    assert.ok((rule.annotations?.summary ?? '').length > 0, `${rule.alert} has a summary`);
    assert.ok((rule.annotations?.runbook ?? '').length > 40, `${rule.alert} has a runbook line saying what it means and what to check first`);
  }
});

test('every alert is unit-tested firing and not firing', () => {
  const cases = ((parse(readFileSync(TESTS_PATH, 'utf8')) as { tests: RuleTest[] }).tests ?? []).flatMap((t) => t.alert_rule_test ?? []);
  for (const rule of alerts()) {
    const own = cases.filter((c) => c.alertname === rule.alert);
    assert.ok(
      own.some((c) => (c.exp_alerts ?? []).length > 0),
      `${rule.alert} has a case where it fires`,
    );
    assert.ok(
      own.some((c) => (c.exp_alerts ?? []).length === 0),
      `${rule.alert} has a case where it does not fire`,
    );
  }
});
