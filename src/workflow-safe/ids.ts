/**
 * The one rule for ids: every id is a PostgreSQL `bigint` identity value, exposed as its decimal
 * string, so an id is 1..9223372036854775807 written without sign or leading zeros. The API's
 * JSON schemas (as a pattern), the domain validators and the request-check validation (API and
 * the scheduler's update validator) all use this module, so no id the database cannot hold
 * reaches a query (PostgreSQL would answer 22003, numeric value out of range). Pure: workflow-safe.
 */

/** The largest `bigint` (int8). */
export const MAX_ID = '9223372036854775807';

/**
 * A regular expression matching exactly the decimal strings 1..`max`: any shorter number, or one
 * of the same length that is below `max` at its first differing digit, or `max` itself.
 */
function upToPattern(max: string): string {
  const alternatives = [`[1-9][0-9]{0,${max.length - 2}}`];
  for (let i = 0; i < max.length; i += 1) {
    const digit = Number(max[i]);
    const lowest = i === 0 ? 1 : 0;
    if (digit <= lowest) continue;
    const rest = max.length - 1 - i;
    alternatives.push(`${max.slice(0, i)}[${lowest}-${digit - 1}]${rest > 0 ? `[0-9]{${rest}}` : ''}`);
  }
  alternatives.push(max);
  return `^(?:${alternatives.join('|')})$`;
}

/** `pattern` of an id in the API's JSON schemas (and OpenAPI document). */
export const ID_PATTERN = upToPattern(MAX_ID);
const ID = new RegExp(ID_PATTERN);

/** What every id rule says when it refuses one. */
export const ID_RULE = `a decimal id from 1 to ${MAX_ID} (no sign, no leading zeros)`;

export function isId(value: unknown): value is string {
  return typeof value === 'string' && ID.test(value);
}

/** Undefined for an id, else why not, naming the value: "must be … , got "007"". */
export function idProblem(value: unknown): string | undefined {
  return isId(value) ? undefined : `must be ${ID_RULE}, got ${JSON.stringify(value) ?? String(value)}`;
}
