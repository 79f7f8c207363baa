/** The PromQL expressions of the deploy files: the Grafana dashboard's panels and variables, the alert rules. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { metricNames, selectorLabels } from './promqlNames.js';

export const DASHBOARD_PATH = fileURLToPath(new URL('../../deploy/grafana/card-poller.json', import.meta.url));
export const ALERTS_PATH = fileURLToPath(new URL('../../deploy/prometheus/alerts.yml', import.meta.url));

export interface Expression {
  /** Where it is, for the failure message (panel title, alert name). */
  readonly where: string;
  readonly expr: string;
}

interface Node {
  readonly [key: string]: unknown;
}

const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null;

/** Every `expr` of the dashboard's panels (rows' panels too) and every query of its template variables. */
export function dashboardExpressions(path = DASHBOARD_PATH): Expression[] {
  const dashboard = JSON.parse(readFileSync(path, 'utf8')) as unknown;
  const found: Expression[] = [];
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) {
      for (const item of node) walk(item, where);
      return;
    }
    if (!isNode(node)) return;
    const title = typeof node.title === 'string' ? `panel "${node.title}"` : where;
    if (typeof node.expr === 'string') found.push({ where: title, expr: node.expr });
    for (const [key, value] of Object.entries(node)) if (key !== 'templating') walk(value, title);
  };
  walk(dashboard, 'dashboard');
  const templating = isNode(dashboard) && isNode(dashboard.templating) ? dashboard.templating.list : [];
  for (const variable of Array.isArray(templating) ? templating : []) {
    if (!isNode(variable) || variable.type !== 'query') continue;
    const query = isNode(variable.query) ? variable.query.query : variable.query;
    if (typeof query === 'string') found.push({ where: `variable $${String(variable.name)}`, expr: query });
  }
  return found;
}

/** Every alert's and recording rule's `expr`. */
export function ruleExpressions(path = ALERTS_PATH): Expression[] {
  const file = parse(readFileSync(path, 'utf8')) as { groups?: { rules?: { alert?: string; record?: string; expr?: string }[] }[] };
  return (file.groups ?? []).flatMap((group) =>
    (group.rules ?? []).map((rule) => ({ where: `rule ${rule.alert ?? rule.record ?? '?'}`, expr: String(rule.expr ?? '') })),
  );
}

/** Series Prometheus makes itself for every target, not served by any /metrics. */
export const SCRAPE_SERIES: ReadonlySet<string> = new Set(['up']);

/** `where: name` for each name an expression reads that `served` lacks (and Prometheus does not make). */
export function namesMissing(expressions: readonly Expression[], served: ReadonlySet<string>): string[] {
  return expressions.flatMap(({ where, expr }) =>
    metricNames(expr)
      .filter((name) => !served.has(name) && !SCRAPE_SERIES.has(name))
      .map((name) => `${where}: ${name}`),
  );
}

/** Labels Prometheus attaches to every series of a target (not in the exposition). */
export const TARGET_LABELS: ReadonlySet<string> = new Set(['job', 'instance']);

/**
 * `where: metric{label}` for each label matcher on a label the metric's served samples lack (a
 * misspelt label matches nothing). Metrics with no samples served (nothing observed yet) are skipped.
 */
export function labelsMissing(expressions: readonly Expression[], served: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  return expressions.flatMap(({ where, expr }) =>
    selectorLabels(expr).flatMap(({ metric, labels }) => {
      const known = served.get(metric);
      if (!known) return [];
      return labels.filter((label) => !known.has(label) && !TARGET_LABELS.has(label)).map((label) => `${where}: ${metric}{${label}}`);
    }),
  );
}
