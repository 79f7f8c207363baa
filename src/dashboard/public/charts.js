// @ts-check
/**
 * Small SVG charts drawn here rather than by a library: a time-series line chart over a fixed
 * window (the account rows) and a bar chart (gateway latency of a card's executions).
 */
import { h, num, svg } from './dom.js';

const WIDTH = 320;
const HEIGHT = 120;
const PAD = { left: 34, right: 6, top: 8, bottom: 16 };

/**
 * @typedef {{ label: string, color: string, points: [number, number][], dashed?: boolean }} Series
 * @typedef {{ title: string, series: Series[], now: number, windowMs: number, gapMs: number, format?: (value: number) => string, field: string }} LineChart
 */

/**
 * How long ago, for the time axis: seconds on short spans, minutes otherwise.
 * @param {number} ms
 * @param {number} span
 */
function ago(ms, span) {
  if (ms <= 0) return 'now';
  return span >= 180_000 ? `−${Math.round(ms / 60_000)}m` : `−${Math.round(ms / 1000)}s`;
}

/**
 * A round upper bound for the y axis so the labels read well.
 * @param {number} max
 */
function niceCeil(max) {
  if (max <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 2.5, 5, 10]) if (max <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

/**
 * Lines of the last `windowMs`; a hole longer than `gapMs` (sampling paused, API down) breaks the line.
 * @param {LineChart} chart
 * @returns {HTMLElement}
 */
export function lineChart(chart) {
  const format = chart.format ?? num;
  const start = chart.now - chart.windowMs;
  const visible = chart.series.map((series) => ({ ...series, points: series.points.filter(([t]) => t >= start) }));
  const top = niceCeil(Math.max(0, ...visible.flatMap((series) => series.points.map(([, v]) => v))) * 1.05);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  /** @param {number} t */
  const x = (t) => PAD.left + ((t - start) / chart.windowMs) * plotW;
  /** @param {number} v */
  const y = (v) => PAD.top + plotH - (Math.max(0, v) / top) * plotH;

  const grid = [0, 0.5, 1].map((f) =>
    svg(
      'g',
      {},
      svg('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(top * f), y2: y(top * f), class: 'grid' }),
      svg('text', { x: PAD.left - 3, y: y(top * f) + 3, class: 'axis', 'text-anchor': 'end' }, format(top * f)),
    ),
  );
  const ticks = [1, 2 / 3, 1 / 3, 0].map((f) =>
    svg(
      'text',
      { x: x(chart.now - f * chart.windowMs), y: HEIGHT - 3, class: 'axis', 'text-anchor': f === 1 ? 'start' : f === 0 ? 'end' : 'middle' },
      ago(f * chart.windowMs, chart.windowMs),
    ),
  );
  const lines = visible.map((series) => {
    let d = '';
    let previous = Number.NEGATIVE_INFINITY;
    for (const [t, v] of series.points) {
      d += `${t - previous > chart.gapMs ? 'M' : 'L'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      previous = t;
    }
    return svg('path', {
      d,
      stroke: series.color,
      class: series.dashed === true ? 'line dashed' : 'line',
      'data-series': series.label,
      'data-points': series.points.length,
    });
  });
  const legend = h(
    'ul',
    { class: 'legend' },
    visible.map((series) => {
      const last = series.points[series.points.length - 1];
      return h(
        'li',
        {},
        h('span', { class: series.dashed === true ? 'swatch dashed' : 'swatch', 'data-color': series.color }),
        `${series.label} `,
        h('b', {}, last === undefined ? '–' : format(last[1])),
      );
    }),
  );
  for (const swatch of legend.querySelectorAll('.swatch')) if (swatch instanceof HTMLElement) swatch.style.borderColor = swatch.dataset.color ?? '';
  const plot = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'chart', role: 'img', 'aria-label': chart.title }, grid, ticks, lines);
  return h('figure', { class: 'chart-box', 'data-chart': chart.field }, h('figcaption', {}, chart.title), plot, legend);
}

/**
 * @typedef {{ label: string, value: number, color: string, title: string }} Bar
 */

/**
 * Bars oldest to newest, left to right.
 * @param {{ title: string, bars: Bar[], unit: string, field: string }} chart
 * @returns {HTMLElement}
 */
export function barChart(chart) {
  const top = niceCeil(Math.max(0, ...chart.bars.map((bar) => bar.value)) * 1.05);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(chart.bars.length, 1);
  /** @param {number} v */
  const y = (v) => PAD.top + plotH - (Math.max(0, v) / top) * plotH;
  const grid = [0, 0.5, 1].map((f) =>
    svg(
      'g',
      {},
      svg('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(top * f), y2: y(top * f), class: 'grid' }),
      svg('text', { x: PAD.left - 3, y: y(top * f) + 3, class: 'axis', 'text-anchor': 'end' }, `${num(top * f)}`),
    ),
  );
  const bars = chart.bars.map((bar, i) =>
    svg(
      'rect',
      {
        x: PAD.left + i * slot + slot * 0.15,
        y: y(bar.value),
        width: Math.max(1, slot * 0.7),
        height: Math.max(0, y(0) - y(bar.value)),
        fill: bar.color,
        class: 'bar',
      },
      svg('title', {}, bar.title),
    ),
  );
  const axis = [
    svg('text', { x: PAD.left, y: HEIGHT - 3, class: 'axis', 'text-anchor': 'start' }, 'older'),
    svg('text', { x: WIDTH - PAD.right, y: HEIGHT - 3, class: 'axis', 'text-anchor': 'end' }, `newest (${chart.unit})`),
  ];
  const plot = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'chart', role: 'img', 'aria-label': chart.title }, grid, bars, axis);
  return h('figure', { class: 'chart-box', 'data-chart': chart.field }, h('figcaption', {}, chart.title), plot);
}
