// @ts-check
/**
 * DOM building and number formatting for the dashboard. Values from the API only ever become text
 * nodes or attributes, never markup.
 */

/** @typedef {string | number | Node | null | undefined | false} Child */

/**
 * `h('td', { class: 'num', 'data-field': 'inflight' }, 12)` — attributes with `undefined`/`false` are left out.
 * @param {string} tag
 * @param {Record<string, string | number | boolean | undefined>} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * @param {string} tag
 * @param {Record<string, string | number | boolean | undefined>} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs = {}, ...children) {
  const el = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * @param {Element} el
 * @param {Record<string, string | number | boolean | undefined>} attrs
 */
function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? '' : String(value));
  }
}

/**
 * @param {Element} el
 * @param {(Child | Child[])[]} children
 */
function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/**
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`#${id} missing from the page`);
  return el;
}

/**
 * Up to three significant decimals, without trailing zeros.
 * @param {number | null | undefined} value
 */
export function num(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  return String(Number(value.toFixed(digits)));
}

/**
 * Milliseconds as ms / s / min.
 * @param {number | null | undefined} ms
 */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 120_000) return `${num(ms / 1000)} s`;
  if (abs < 7_200_000) return `${num(ms / 60_000)} min`;
  return `${num(ms / 3_600_000)} h`;
}

/**
 * Local date and time of an epoch millisecond or ISO string.
 * @param {number | string | null | undefined} when
 */
export function time(when) {
  if (when === null || when === undefined) return '–';
  const date = new Date(when);
  return Number.isNaN(date.getTime()) ? '–' : date.toLocaleString();
}
