// @ts-check
/**
 * Calls to the card-poller API with the bearer token the operator typed once. The token stays in
 * this browser's localStorage; the server never puts it in the page.
 */

const TOKEN_KEY = 'cardpoller.apiToken';

/** The API refused the token (or none was given): the page asks for it again. */
export class Unauthorized extends Error {}

/** Any other error answer, with the API's `{ error: { code, message, field? } }` message. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** @returns {string | null} */
export function storedToken() {
  return localStorage.getItem(TOKEN_KEY);
}

/** @param {string} token */
export function storeToken(token) {
  localStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  localStorage.removeItem(TOKEN_KEY);
}

/**
 * The parsed answer; callers state what they expect of it (the API's answer shapes).
 * @param {'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<unknown>}
 */
export async function call(method, path, body) {
  const token = storedToken();
  if (token === null) throw new Unauthorized('no token');
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, cache: 'no-store', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  if (response.status === 401) throw new Unauthorized('token refused');
  const text = await response.text();
  /** @type {unknown} */
  const parsed = text === '' ? {} : JSON.parse(text);
  if (!response.ok) {
    const error = /** @type {{ error?: { code?: string, message?: string } }} */ (parsed).error;
    throw new ApiError(response.status, error?.code ?? 'error', error?.message ?? `${method} ${path}: HTTP ${response.status}`);
  }
  return parsed;
}
