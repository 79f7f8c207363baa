/**
 * HTTP client of the gateway contract (docs/gateway-contract.md).
 *
 * - node:http with a keep-alive Agent: a bounded pool of reused connections per gateway host.
 * - One timeout per call, bound to the caller's deadline (the step's remaining time), plus the
 *   caller's AbortSignal (activity cancellation); both abort the socket at once.
 * - Every failure becomes a {@link GatewayError} with one class. No retries here: retry policy
 *   belongs to the workflow, which knows the step's budget and the failure class.
 * - The body is written only once the request has a connected socket, so a rate-limited call that
 *   waited in the agent's queue past its slot (`sendBy`) is never sent and can get a new slot.
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import type { GatewayCheckType } from '../workflow-safe/checkTypes.js';
import { checkPath, checkResponseSchema, errorResponseSchema, observationSchemas, type CheckRequest, type ObservationByType } from './contract.js';
import { GatewayError } from './errors.js';
import { parseRetryAfter } from './retryAfter.js';

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_SOCKETS = 256;
/** Contract answers are a few hundred bytes; anything far larger is not a contract answer. */
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

export interface GatewayClientOptions {
  /** Base URL of the gateway, e.g. `http://127.0.0.1:8700`. */
  readonly baseUrl: string;
  /** Upper bound of open connections to the gateway. @default 256 */
  readonly maxSockets?: number;
  /** Timeout of a call when the caller gives neither timeoutMs nor deadline. @default 10000 */
  readonly defaultTimeoutMs?: number;
  /** @default 65536 */
  readonly maxResponseBytes?: number;
}

export interface GatewayCallOptions {
  /** Time allowed for this call. */
  readonly timeoutMs?: number;
  /** Absolute end (epoch ms) of the step; the call never runs past it. */
  readonly deadline?: number;
  /** Aborts the call (e.g. the activity's cancellation signal). */
  readonly signal?: AbortSignal;
  readonly requestId?: string;
  /**
   * Latest time (epoch ms) the request may be sent: the end of its rate-limit slot. One that only
   * gets a connection later is not sent and fails with reason `send_window_missed`.
   */
  readonly sendBy?: number;
  /** Called with the time (epoch ms) the request is written to its connection. */
  readonly onSend?: (at: number) => void;
}

export interface GatewayObservation<T extends GatewayCheckType> {
  readonly type: T;
  readonly account: string;
  readonly iccid: string;
  readonly collectionId: string;
  /** When the carrier observed the state (epoch ms). */
  readonly observedAtMs: number;
  /** When the carrier saw this state change (epoch ms), where it says. */
  readonly changedAtMs?: number;
  readonly observation: ObservationByType[T];
  /** Wall time of the HTTP exchange, from the call (including any wait for a connection). */
  readonly latencyMs: number;
  /** When the request was written to its connection (epoch ms). */
  readonly sentAtMs: number;
}

interface RawResponse {
  readonly sentAtMs: number;
  readonly status: number;
  readonly retryAfterHeader: string | undefined;
  readonly body: string;
}

export class GatewayClient {
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;
  private readonly defaultTimeoutMs: number;
  private readonly maxResponseBytes: number;

  constructor(options: GatewayClientOptions) {
    this.base = new URL(options.baseUrl);
    const secure = this.base.protocol === 'https:';
    this.transport = secure ? https : http;
    const agentOptions: http.AgentOptions = {
      keepAlive: true,
      maxSockets: options.maxSockets ?? DEFAULT_MAX_SOCKETS,
      maxFreeSockets: options.maxSockets ?? DEFAULT_MAX_SOCKETS,
      // LIFO reuses the warmest sockets and lets the rest idle out on the server's keep-alive timeout.
      scheduling: 'lifo',
    };
    this.agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  /** Asks the gateway for one check type of one card. Throws {@link GatewayError} on any failure. */
  async check<T extends GatewayCheckType>(
    type: T,
    request: { readonly account: string; readonly iccid: string },
    options: GatewayCallOptions = {},
  ): Promise<GatewayObservation<T>> {
    const timeoutMs = this.timeoutFor(options);
    if (options.signal?.aborted) throw abortedError();
    if (timeoutMs <= 0) throw new GatewayError('transient', 'timeout', 'no time left for the gateway call');
    const started = performance.now();
    // Typed by the contract the carrier (and the simulator) validates requests against.
    const body = JSON.stringify({ account: request.account, iccid: request.iccid, requestId: options.requestId } satisfies CheckRequest);
    const raw = await this.send(checkPath(type), body, timeoutMs, options);
    const latencyMs = performance.now() - started;
    if (raw.status < 200 || raw.status > 299) throw errorFromResponse(raw);
    return parseSuccess(type, request, raw.body, latencyMs, raw.sentAtMs);
  }

  /** Closes pooled connections. Calls in flight fail with a network error. */
  close(): void {
    this.agent.destroy();
  }

  private timeoutFor(options: GatewayCallOptions): number {
    const own = options.timeoutMs ?? this.defaultTimeoutMs;
    if (options.deadline === undefined) return own;
    return Math.min(own, options.deadline - Date.now());
  }

  private send(path: string, body: string, timeoutMs: number, options: GatewayCallOptions): Promise<RawResponse> {
    const callerSignal = options.signal;
    const timeoutSignal = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal ? AbortSignal.any([callerSignal, timeoutSignal]) : timeoutSignal;
    const url = new URL(path, this.base);
    return new Promise<RawResponse>((resolve, reject) => {
      let settled = false;
      let sentAtMs = 0;
      let missTimer: NodeJS.Timeout | undefined;
      const fail = (error: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(missTimer);
        // Which signal fired decides the reason: the caller's cancellation or our own timeout.
        if (callerSignal?.aborted) reject(abortedError());
        else if (timeoutSignal.aborted) reject(new GatewayError('transient', 'timeout', `gateway call timed out after ${timeoutMs} ms`));
        else if (error instanceof GatewayError) reject(error);
        else reject(new GatewayError('transient', 'network', `gateway unreachable: ${describe(error)}`));
      };
      const req = this.transport.request(
        url,
        {
          method: 'POST',
          agent: this.agent,
          signal,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > this.maxResponseBytes) {
              fail(new GatewayError('invalid_response', 'malformed', `gateway answer larger than ${this.maxResponseBytes} bytes`, undefined, res.statusCode));
              res.destroy();
              return;
            }
            chunks.push(chunk);
          });
          res.on('error', fail);
          res.on('end', () => {
            if (settled) return;
            settled = true;
            const header = res.headers['retry-after'];
            resolve({
              sentAtMs,
              status: res.statusCode ?? 0,
              retryAfterHeader: typeof header === 'string' ? header : undefined,
              body: Buffer.concat(chunks).toString('utf8'),
            });
          });
        },
      );
      req.on('error', fail);
      const missed = (why: string): void => {
        fail(new GatewayError('transient', 'send_window_missed', `not sent: ${why}`));
        req.destroy();
      };
      const sendBy = options.sendBy;
      if (sendBy !== undefined) {
        // Still queued in the agent when the slot ends: leave the queue (a destroyed request that
        // never got a socket hands it back to the pool untouched).
        missTimer = setTimeout(() => missed(`no connection was free before the call's slot ended`), Math.max(0, sendBy - Date.now()));
      }
      // Written when a connected socket is ours, not before: until then the call may still wait in
      // the agent's queue (all sockets busy), and a call past its slot must not go out at all.
      req.once('socket', (socket: Socket) => {
        const write = (): void => {
          if (settled) return;
          clearTimeout(missTimer);
          const at = Date.now();
          if (sendBy !== undefined && at > sendBy) {
            missed(`its connection came ${at - sendBy} ms after the call's slot ended`);
            return;
          }
          sentAtMs = at;
          options.onSend?.(at);
          req.end(body);
        };
        if (!socket.connecting) write();
        else socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', write);
      });
    });
  }
}

function abortedError(): GatewayError {
  return new GatewayError('transient', 'aborted', 'gateway call aborted by the caller');
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code ? `${code} ${error.message}` : error.message;
  }
  return String(error);
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Maps a non-2xx answer: the carrier's error body wins; the status decides when there is none. */
function errorFromResponse(raw: RawResponse): GatewayError {
  const headerRetry = parseRetryAfter(raw.retryAfterHeader, Date.now());
  const parsed = errorResponseSchema.safeParse(tryJson(raw.body));
  if (parsed.success) {
    const { class: errorClass, code, message, retryAfterMs } = parsed.data.error;
    return new GatewayError(
      errorClass,
      'carrier',
      message ?? code ?? `gateway answered ${raw.status}`,
      errorClass === 'rate_limited' ? (retryAfterMs ?? headerRetry) : undefined,
      raw.status,
      code,
    );
  }
  const message = `gateway answered ${raw.status} without a contract error body`;
  if (raw.status === 429) return new GatewayError('rate_limited', 'http_status', message, headerRetry, raw.status);
  if (raw.status === 408 || (raw.status >= 500 && raw.status <= 599)) return new GatewayError('transient', 'http_status', message, undefined, raw.status);
  if (raw.status >= 400 && raw.status <= 499) return new GatewayError('permanent', 'http_status', message, undefined, raw.status);
  return new GatewayError('invalid_response', 'http_status', message, undefined, raw.status);
}

function parseSuccess<T extends GatewayCheckType>(
  type: T,
  request: { readonly account: string; readonly iccid: string },
  body: string,
  latencyMs: number,
  sentAtMs: number,
): GatewayObservation<T> {
  const malformed = (why: string): GatewayError => new GatewayError('invalid_response', 'malformed', `gateway answer for ${type}: ${why}`, undefined, 200);
  const json = tryJson(body);
  if (json === undefined) throw malformed('body is not JSON');
  const envelope = checkResponseSchema.safeParse(json);
  if (!envelope.success) throw malformed(envelope.error.issues[0]?.message ?? 'invalid envelope');
  // An answer about another card or type must never be stored as this card's state.
  if (envelope.data.type !== type || envelope.data.iccid !== request.iccid || envelope.data.account !== request.account) {
    throw malformed('answer is about another card, account or type');
  }
  const observation = observationSchemas[type].safeParse(envelope.data.observation);
  if (!observation.success) throw malformed(observation.error.issues[0]?.message ?? 'invalid observation');
  return {
    type,
    account: envelope.data.account,
    iccid: envelope.data.iccid,
    collectionId: envelope.data.collectionId,
    observedAtMs: Date.parse(envelope.data.observedAt),
    ...(envelope.data.changedAt === undefined ? {} : { changedAtMs: Date.parse(envelope.data.changedAt) }),
    observation: observation.data as ObservationByType[T],
    latencyMs,
    sentAtMs,
  };
}
