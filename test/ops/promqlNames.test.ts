/** The PromQL name tokenizer the dashboard and alert checks rely on. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { metricNames, selectorLabels, servedLabels, servedNames } from './promqlNames.js';

test('metric names: functions, aggregations, grouping labels, matchers, ranges and variables are not names', () => {
  assert.deepEqual(
    metricNames('histogram_quantile(0.99, sum by (carrier, le) (rate(cardpoller_lateness_seconds_bucket{carrier=~"$carrier"}[$__rate_interval])))'),
    ['cardpoller_lateness_seconds_bucket'],
  );
  assert.deepEqual(
    metricNames('sum by (carrier) (rate(a_total{outcome="rate_limited"}[5m])) / on (carrier) group_left sum by (carrier) (rate(b_count[5m])) > 0.01'),
    ['a_total', 'b_count'],
  );
  assert.deepEqual(metricNames('time() - max by (carrier) (x_seconds) > 120 or max(y) unless on (carrier) z and w offset 1h == bool 1e3'), [
    'w',
    'x_seconds',
    'y',
    'z',
  ]);
  assert.deepEqual(metricNames('max by(carrier)(max_over_time(up{job=~"card-poller.*"}[1h:1m]))'), ['up']);
  assert.deepEqual(metricNames('label_values(cardpoller_inflight_limit, carrier)'), ['cardpoller_inflight_limit']);
  assert.deepEqual(metricNames('sum without (instance) (rate(temporal_request{operation="Poll"}[${__range}]))'), ['temporal_request']);
});

test('served names: declared families, their histogram series and every sample', () => {
  const names = servedNames(
    [
      '# HELP h_seconds latency',
      '# TYPE h_seconds histogram',
      '# HELP c_total count',
      '# TYPE c_total counter',
      'c_total{a="1"} 3',
      'sdk_counter{x="y"} 2',
      'plain 1',
    ].join('\n'),
  );
  assert.deepEqual([...names].sort(), ['c_total', 'h_seconds', 'h_seconds_bucket', 'h_seconds_count', 'h_seconds_sum', 'plain', 'sdk_counter']);
});

test('selector labels: the label names of each matcher list, values with braces and operators ignored', () => {
  assert.deepEqual(selectorLabels('sum(rate(a_count{carrier=~"$carrier", group!="", x="a}b,c=d"}[5m])) / max(b{outcome!~"x|y"}) + c'), [
    { metric: 'a_count', labels: ['carrier', 'group', 'x'] },
    { metric: 'b', labels: ['outcome'] },
  ]);
});

test('served labels: the label names of each sample', () => {
  const labels = servedLabels(['# TYPE h histogram', 'h_bucket{le="1",carrier="2"} 3', 'h_bucket{le="+Inf",carrier="2",type="x"} 3', 'plain 1'].join('\n'));
  assert.deepEqual(
    [...labels.entries()].map(([name, set]) => [name, [...set].sort()]),
    [['h_bucket', ['carrier', 'le', 'type']]],
  );
});
