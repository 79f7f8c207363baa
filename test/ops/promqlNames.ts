/**
 * The metric names a PromQL expression reads, for checking dashboards and alert rules against what
 * the processes serve. A tokenizer, not a parser: strings, label matchers, range selectors,
 * grouping clauses and Grafana variables are removed, and what remains of the identifiers — those
 * not followed by `(` (functions) and not PromQL keywords — are metric names.
 */

/** Aggregation operators and binary-operator keywords: never metric names. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'inf',
  'nan',
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
]);

/** Clauses whose parenthesised list holds label names, not expressions. */
const LABEL_LISTS = /\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g;

export function metricNames(expression: string): string[] {
  let text = expression
    // Grafana's `label_values(metric, label)` (template variables): only the metric is a name.
    .replace(/label_values\(\s*([^,)]*?)\s*,[^)]*\)/g, ' $1 ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ')
    .replace(LABEL_LISTS, ' ');
  // `x offset 5m`: the duration is not a name.
  text = text.replace(/\boffset\s+\S+/g, ' ');
  const names = new Set<string>();
  for (const match of text.matchAll(/(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*(?![\w:])(?!\s*\()/g)) {
    const name = match[0];
    if (!KEYWORDS.has(name.toLowerCase())) names.add(name);
  }
  return [...names].sort();
}

/** Each `metric{label matchers}` of an expression: the metric and the label names its matchers use. */
export function selectorLabels(expression: string): { metric: string; labels: string[] }[] {
  const text = expression.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ').replace(/\$\{[^}]*\}/g, ' ');
  return [...text.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)].map((match) => ({
    metric: match[1] ?? '',
    labels: [...(match[2] ?? '').matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((label) => label[1] ?? ''),
  }));
}

/** The label names each metric's samples carry in a Prometheus text exposition. */
export function servedLabels(exposition: string): Map<string, Set<string>> {
  const labels = new Map<string, Set<string>>();
  for (const line of exposition.split('\n')) {
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} \S+$/.exec(line);
    if (!sample?.[1]) continue;
    const names = labels.get(sample[1]) ?? new Set<string>();
    for (const label of (sample[2] ?? '').matchAll(/(?:^|,)([a-zA-Z_]\w*)="/g)) names.add(label[1] ?? '');
    labels.set(sample[1], names);
  }
  return labels;
}

/** The metric names a Prometheus text exposition serves (families declared by HELP/TYPE and sample names). */
export function servedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const declared = /^# (?:HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (declared?.[1]) {
      names.add(declared[1]);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (sample?.[1]) names.add(sample[1]);
  }
  // A declared histogram or summary serves its series even before its first observation.
  for (const line of exposition.split('\n')) {
    const typed = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (histogram|summary)/.exec(line);
    if (!typed?.[1]) continue;
    for (const suffix of typed[2] === 'histogram' ? ['_bucket', '_sum', '_count'] : ['_sum', '_count']) names.add(`${typed[1]}${suffix}`);
  }
  return names;
}
