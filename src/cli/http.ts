/**
 * The CLI's HTTP client of the API: the CLI never touches the database itself, so its validation
 * and messages are the API's. Errors carry the API's `{ code, message, field }`.
 */
export interface ApiClientOptions {
  readonly baseUrl: string;
  readonly token: string;
}

export class ApiCallError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ApiCallError';
  }
}

export interface RequestOptions {
  readonly body?: unknown;
  /** Raw body sent as is (NDJSON import). */
  readonly raw?: string;
  readonly contentType?: string;
}

export class ApiClient {
  constructor(private readonly options: ApiClientOptions) {}

  async request(method: string, path: string, options: RequestOptions = {}): Promise<unknown> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.token}` };
    let body: string | undefined;
    if (options.raw !== undefined) {
      body = options.raw;
      headers['content-type'] = options.contentType ?? 'application/json';
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const url = `${this.options.baseUrl.replace(/\/+$/, '')}${path}`;
    let response: Response;
    try {
      response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
    } catch (error) {
      throw new ApiCallError(
        0,
        'unreachable',
        `cannot reach the API at ${url}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
      );
    }
    const text = await response.text();
    const parsed: unknown = text === '' ? undefined : response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
    if (!response.ok) {
      const error = (parsed as { error?: { code?: string; message?: string; field?: string } } | undefined)?.error;
      throw new ApiCallError(response.status, error?.code ?? String(response.status), error?.message ?? (text || response.statusText), error?.field);
    }
    return parsed;
  }
}
