/**
 * Carrier gateway simulator: the gateway contract (docs/gateway-contract.md) for any number of
 * accounts, with carrier-side QPS enforcement, latency, fault injection and changing card state,
 * plus the `/sim/*` control and measuring endpoints, and pushed events of card changes
 * (src/simulator/push.ts).
 *
 * It is the measuring instrument of the benchmarks, so it is plain node:http with no framework and
 * O(1) work per call.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomInt } from 'node:crypto';
import type { ZodError } from 'zod';
import { isGatewayCheckType, type GatewayCheckType } from '../workflow-safe/checkTypes.js';
import { checkRequestSchema, type ErrorResponse, type GatewayErrorClass } from '../gateway/contract.js';
import { accountCardsSchema, accountUpdateSchema, cardStateUpdateSchema, SimWorld, type CardChange, type SimCard } from './model.js';
import { Pusher, pushSettings, pushSettingsSchema, type PushedChange } from './push.js';
import { logNormal } from './random.js';
import { processMemory, watchLiveHeap } from '../runtime/liveHeap.js';

const MAX_BODY_BYTES = 16 * 1024;
/** Control endpoints take more: a registration of an account's cards lists tens of thousands. */
const MAX_CONTROL_BODY_BYTES = 8 * 1024 * 1024;
/** How often drift (cards changing by themselves at their account's rate) is applied. */
const DRIFT_EVERY_MS = 1000;
/** ICCIDs are 19–20 digits (some carriers append a hex check character). */
const ICCID = /^[0-9]{18,21}[0-9A-Fa-f]?$/;
/** Latency samples above this many p99s are cut: a simulated tail, not a hang. */
const LATENCY_CAP_P99 = 10;

export interface SimulatorOptions {
  readonly host?: string;
  /** 0 = any free port (tests). */
  readonly port?: number;
  /** Seed of every random choice; same seed + same call order = same behaviour. */
  readonly seed?: number;
}

export interface RunningSimulator {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly world: SimWorld;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly errorClass: GatewayErrorClass,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const world = new SimWorld(options.seed ?? randomInt(2 ** 31));
  watchLiveHeap();
  const timers = new Set<NodeJS.Timeout>();
  let sequence = 0;
  // Unique per simulator start, so collection ids never repeat across restarts (ingest dedups by them).
  let runTag = Date.now().toString(36);
  /** Accounts pushing their changes, by account. */
  const pushers = new Map<string, Pusher>();
  // Never reset (not by /sim/reset either): event ids stay unique within the run whatever the clock.
  let eventSequence = 0;

  const later = (ms: number, fn: () => void): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const handleCheck = (type: GatewayCheckType, body: unknown, res: http.ServerResponse): void => {
    const arrival = performance.now();
    const parsed = checkRequestSchema.safeParse(body);
    if (!parsed.success) throw new HttpError(400, 'permanent', 'bad_request', parsed.error.issues[0]?.message ?? 'invalid request');
    const { account: accountName, iccid, requestId } = parsed.data;
    const card = world.attach(iccid, accountName);
    card.calls += 1;
    card.lastCallAt = Date.now();
    card.inflight += 1;
    card.maxConcurrent = Math.max(card.maxConcurrent, card.inflight);
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      card.inflight -= 1;
    };
    // 'close' also fires when the client gives up early: the card is no longer being executed.
    res.on('close', finish);

    const admission = world.admit(accountName, type, arrival, requestId ?? `${iccid}#${card.calls}`);
    if (!admission.admitted) {
      res.setHeader('retry-after', String(Math.ceil(admission.retryAfterMs / 1000)));
      sendError(res, 429, {
        error: { class: 'rate_limited', code: 'qps_exceeded', message: `QPS limit of group ${admission.group} exceeded`, retryAfterMs: admission.retryAfterMs },
      });
      return;
    }
    const settings = world.account(accountName).settings;
    const roll = world.random();
    if (roll < settings.timeoutRate) {
      admission.counters.faults += 1;
      later(settings.timeoutHoldMs, () => sendError(res, 504, { error: { class: 'transient', code: 'carrier_timeout', message: 'carrier did not answer' } }));
      return;
    }
    const latency = Math.min(logNormal(world.random, settings.latencyMs.p50, settings.latencyMs.p99), settings.latencyMs.p99 * LATENCY_CAP_P99);
    later(latency, () => {
      if (res.destroyed) return;
      if (roll < settings.timeoutRate + settings.errorRate) {
        admission.counters.faults += 1;
        sendError(res, 503, { error: { class: 'transient', code: 'carrier_unavailable', message: 'carrier temporarily unavailable' } });
        return;
      }
      if (!ICCID.test(iccid)) {
        sendError(res, 400, { error: { class: 'permanent', code: 'invalid_iccid', message: `not an ICCID: ${iccid}` } });
        return;
      }
      if (roll < settings.timeoutRate + settings.errorRate + settings.malformedRate) {
        sendMalformed(res, world.random());
        return;
      }
      sequence += 1;
      // One instant for the answer's date and for the changes it carries (their staleness).
      const answeredAt = Date.now();
      card.answered += 1;
      sendJson(res, 200, {
        type,
        account: accountName,
        iccid,
        collectionId: `sim-${runTag}-${sequence}`,
        observedAt: new Date(answeredAt).toISOString(),
        ...changedAt(type, card),
        observation: observe(type, card, settings.realnameFlipRate, answeredAt),
      });
    });
  };

  /** The carrier's date of the state the answer shows, once the card's state of `type` has changed here. */
  const changedAt = (type: GatewayCheckType, card: SimCard): { changedAt?: string } => {
    const at = type === 'card_status' || type === 'realname' ? card.changedAt[type] : undefined;
    return at === undefined ? {} : { changedAt: new Date(at).toISOString() };
  };

  const observe = (type: GatewayCheckType, card: SimCard, flipRate: number, answeredAt: number): object => {
    // The answer carries the card's state as it is now: any change stamped before is learned.
    world.answered(card, type, answeredAt);
    const answer = world.observation(card, type, answeredAt);
    // The flip comes after the answer (it shows the state before) and is a change like any other.
    if (type === 'realname' && world.random() < flipRate) {
      card.realname = card.realname === 'verified' ? 'unverified' : 'verified';
      world.changed(card, 'realname', answeredAt);
    }
    return answer;
  };

  /** A change of a pushing account's card becomes an event: the answer a check would give at the change's instant. */
  world.onChange = (change: CardChange): void => {
    const pusher = pushers.get(change.account);
    if (!pusher?.wants(change.type)) return;
    eventSequence += 1;
    const instant = new Date(change.at).toISOString();
    pusher.push({
      event: {
        id: `sim-evt-${runTag}-${eventSequence}`,
        type: change.type,
        iccid: change.card.iccid,
        observedAt: instant,
        changedAt: instant,
        observation: world.observation(change.card, change.type, change.at),
      },
      serial: change.serial,
    });
  };

  /** A 2xx to a push learns the changes it carried, as an answer would. */
  const pushDelivered = (changes: readonly PushedChange[], at: number): void => {
    for (const { event, serial } of changes) {
      if (serial !== undefined && (event.type === 'card_status' || event.type === 'realname')) world.pushDelivered(event.iccid, event.type, serial, at);
    }
  };

  const stopPushing = (account: string): void => {
    pushers.get(account)?.stop();
    pushers.delete(account);
  };

  /**
   * A delayed stop/resume is applied lazily when the card is next touched; a pushing account's
   * card gets it applied when due instead, so the event leaves at the change.
   */
  const applyWhenDue = (card: SimCard): void => {
    const pending = card.pendingNetwork;
    // Reset since (another card under that ICCID now), or no transition left.
    if (world.cards.get(card.iccid) !== card || pending === undefined) return;
    const wait = pending.at - Date.now();
    if (wait > 0) later(wait, () => applyWhenDue(card));
    else world.card(card.iccid);
  };

  const route = (req: http.IncomingMessage, res: http.ServerResponse, body: unknown): void => {
    const url = new URL(req.url ?? '/', 'http://sim');
    const parts = url.pathname
      .split('/')
      .filter((part) => part !== '')
      .map(decodeURIComponent);
    const [first, second, third, fourth] = parts;
    if (req.method === 'POST' && first === 'v1' && second === 'checks' && parts.length === 3) {
      if (!isGatewayCheckType(third)) throw new HttpError(404, 'permanent', 'unknown_check_type', `no endpoint for check type ${third}`);
      handleCheck(third, body, res);
      return;
    }
    if (first !== 'sim') throw new HttpError(404, 'permanent', 'not_found', `no route ${req.method} ${url.pathname}`);
    if (req.method === 'GET' && second === 'stats' && parts.length === 2) {
      sendJson(res, 200, { ...world.stats(url.searchParams.get('cards') !== '0'), process: processMemory() });
    } else if (req.method === 'PUT' && second === 'accounts' && third !== undefined && parts.length === 3) {
      const update = accountUpdateSchema.safeParse(body);
      if (!update.success) throw badRequest(update.error);
      sendJson(res, 200, world.updateAccount(third, update.data));
    } else if (req.method === 'POST' && second === 'accounts' && third !== undefined && fourth === 'cards' && parts.length === 4) {
      const cards = accountCardsSchema.safeParse(body);
      if (!cards.success) throw badRequest(cards.error);
      for (const iccid of cards.data.iccids) world.attach(iccid, third);
      sendJson(res, 200, { cards: world.account(third).cards.length });
    } else if (req.method === 'PUT' && second === 'accounts' && third !== undefined && fourth === 'push' && parts.length === 4) {
      const parsed = pushSettingsSchema.safeParse(body);
      if (!parsed.success) throw badRequest(parsed.error);
      // New settings replace the old pusher whole (its waiting events are dropped, counted).
      stopPushing(third);
      const settings = pushSettings(parsed.data);
      pushers.set(third, new Pusher(third, settings, world.pushCounters(third), pushDelivered));
      // The secret is not echoed back.
      sendJson(res, 200, { pushing: true, url: settings.url, types: settings.types, batchMs: settings.batchMs, format: settings.format });
    } else if (req.method === 'DELETE' && second === 'accounts' && third !== undefined && fourth === 'push' && parts.length === 4) {
      stopPushing(third);
      sendJson(res, 200, { pushing: false });
    } else if (req.method === 'POST' && second === 'cards' && third !== undefined && fourth === 'state' && parts.length === 4) {
      const update = cardStateUpdateSchema.safeParse(body);
      if (!update.success) throw badRequest(update.error);
      const card = world.updateCard(third, update.data);
      if (card.pendingNetwork !== undefined && card.account !== undefined && pushers.has(card.account)) applyWhenDue(card);
      sendJson(res, 200, { network: card.network, pendingNetwork: card.pendingNetwork ?? null, realname: card.realname, usageKb: world.usageKb(card) });
    } else if (req.method === 'POST' && second === 'reset' && parts.length === 2) {
      const seed = typeof body === 'object' && body !== null && 'seed' in body && typeof body.seed === 'number' ? body.seed : undefined;
      // The accounts (and their push counters) go: their pushers stop reporting at once.
      for (const pusher of pushers.values()) pusher.abort();
      pushers.clear();
      world.reset(seed);
      sequence = 0;
      runTag = Date.now().toString(36);
      sendJson(res, 200, { reset: true });
    } else {
      throw new HttpError(404, 'permanent', 'not_found', `no route ${req.method} ${url.pathname}`);
    }
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const limit = (req.url ?? '').startsWith('/sim/') ? MAX_CONTROL_BODY_BYTES : MAX_BODY_BYTES;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        if (size > limit) throw new HttpError(413, 'permanent', 'body_too_large', 'request body too large');
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = undefined;
        if (text !== '') {
          try {
            body = JSON.parse(text) as unknown;
          } catch {
            throw new HttpError(400, 'permanent', 'bad_json', 'request body is not JSON');
          }
        }
        route(req, res, body);
      } catch (error) {
        if (error instanceof HttpError) sendError(res, error.status, { error: { class: error.errorClass, code: error.code, message: error.message } });
        else sendError(res, 500, { error: { class: 'transient', code: 'internal', message: error instanceof Error ? error.message : String(error) } });
      }
    });
  });
  // Keep client connections open longer than a client's idle pool would (keep-alive reuse).
  server.keepAliveTimeout = 10_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const drift = setInterval(() => world.drift(Date.now()), DRIFT_EVERY_MS);
  drift.unref();
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}`,
    world,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(drift);
        for (const pusher of pushers.values()) pusher.abort();
        pushers.clear();
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function sendJson(res: http.ServerResponse, status: number, payload: unknown): void {
  if (res.destroyed || res.headersSent) return;
  const body = JSON.stringify(payload);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: http.ServerResponse, status: number, payload: ErrorResponse): void {
  sendJson(res, status, payload);
}

/** Broken answers a real gateway has been seen to give: not JSON, or JSON missing the observation. */
function sendMalformed(res: http.ServerResponse, pick: number): void {
  if (res.destroyed || res.headersSent) return;
  const body = pick < 0.5 ? '<html><body>502 Bad Gateway</body></html>' : JSON.stringify({ ok: true, data: null });
  res.writeHead(200, { 'content-type': pick < 0.5 ? 'text/html' : 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** A control body zod refused: 400 naming the first bad field (`types.1: Invalid option…`), so the caller sees what to fix. */
function badRequest(error: ZodError): HttpError {
  const issue = error.issues[0];
  if (issue === undefined) return new HttpError(400, 'permanent', 'bad_request', 'invalid body');
  const field = issue.path.map(String).join('.');
  return new HttpError(400, 'permanent', 'bad_request', field === '' ? issue.message : `${field}: ${issue.message}`);
}
