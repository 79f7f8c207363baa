/**
 * The simulator's pushed events (docs/gateway-contract.md, 'Pushed events' and 'Simulator control
 * endpoints'): an account's card changes POSTed, signed, to a callback URL, one request per event
 * or a window's events in one, as the contract's JSON or as CloudEvents.
 *
 * Delivery runs beside the answering of calls and never holds one up: events are queued, at most
 * MAX_INFLIGHT requests per account are open, and a failed request is retried with backoff for a
 * minute, then dropped.
 */
import { z } from 'zod';
import { GATEWAY_CHECK_TYPES, type GatewayCheckType } from '../workflow-safe/checkTypes.js';
import type { ObservationByType } from '../gateway/contract.js';
import { ACCOUNT_HEADER, CLOUDEVENTS, CLOUDEVENTS_BATCH, SIGNATURE_HEADER, signEvents } from '../gateway/events.js';
import { CHANGING_TYPES, type PushCounters } from './model.js';

/** Events in one request at most (the contract's bound). */
const MAX_BATCH = 1000;
/** A request without an answer after this long failed (network error: retried). */
const REQUEST_TIMEOUT_MS = 5000;
/** An event not delivered this long after it was queued is dropped. */
const DELIVERY_DEADLINE_MS = 60_000;
const RETRY_BASE_MS = 200;
const RETRY_MAX_MS = 10_000;
/** Open requests per account: a slow receiver cannot make the simulator open thousands of sockets. */
const MAX_INFLIGHT = 16;
/** Requests waiting for a slot, per account: beyond, new ones are dropped (memory stays bounded). */
const MAX_QUEUED = 10_000;

const PUSH_FORMATS = ['json', 'cloudevents'] as const;

/** Body of `PUT /sim/accounts/:account/push`. */
export const pushSettingsSchema = z.object({
  /** Where events are POSTed (the orchestrator's `POST /v1/events`). */
  url: z.url({ protocol: /^https?$/ }),
  /** Key of the HMAC in `X-Cardpoller-Signature` (the account's `eventSecret` at the receiver). */
  secret: z.string().min(1).max(200),
  /** Types pushed; default the changing ones (carddata grows by itself; only a set usage is pushed). */
  types: z.array(z.enum(GATEWAY_CHECK_TYPES)).min(1).optional(),
  /** 0: one request per event; else a window's events (up to MAX_BATCH) in one request. */
  batchMs: z.number().nonnegative().max(DELIVERY_DEADLINE_MS).optional(),
  format: z.enum(PUSH_FORMATS).optional(),
});
type PushSettingsBody = z.infer<typeof pushSettingsSchema>;

export interface PushSettings {
  readonly url: string;
  readonly secret: string;
  readonly types: readonly GatewayCheckType[];
  readonly batchMs: number;
  readonly format: (typeof PUSH_FORMATS)[number];
}

export function pushSettings(body: PushSettingsBody): PushSettings {
  return { url: body.url, secret: body.secret, types: body.types ?? CHANGING_TYPES, batchMs: body.batchMs ?? 0, format: body.format ?? 'json' };
}

/** One event as the contract defines it (`application/json`). */
export interface PushEvent {
  readonly id: string;
  readonly type: GatewayCheckType;
  readonly iccid: string;
  readonly observedAt: string;
  readonly changedAt: string;
  readonly observation: ObservationByType[GatewayCheckType];
}

/** An event with the serial of the change it carried (a 2xx makes that change learned). */
export interface PushedChange {
  readonly event: PushEvent;
  readonly serial: number | undefined;
}

/** One request's events, encoded once: a retry sends the same body under a fresh signature. */
interface Delivery {
  readonly changes: readonly PushedChange[];
  readonly contentType: string;
  readonly body: string;
  /** Epoch ms after which the events are dropped instead of (re)sent. */
  readonly deadline: number;
  attempts: number;
}

type Outcome =
  { readonly kind: 'delivered'; readonly at: number } | { readonly kind: 'refused' } | { readonly kind: 'retry'; readonly afterMs: number | undefined };

/** The request body and its content type for `events` in the settings' format. */
function encodeEvents(account: string, events: readonly PushEvent[], batch: boolean, format: PushSettings['format']): { contentType: string; body: string } {
  if (format === 'json') return { contentType: 'application/json', body: JSON.stringify(batch ? { events } : events[0]) };
  const cloudEvents = events.map((event) => cloudEvent(account, event));
  return batch ? { contentType: CLOUDEVENTS_BATCH, body: JSON.stringify(cloudEvents) } : { contentType: CLOUDEVENTS, body: JSON.stringify(cloudEvents[0]) };
}

/** The event as a CloudEvent 1.0 in structured mode. */
function cloudEvent(account: string, event: PushEvent): Record<string, unknown> {
  return {
    specversion: '1.0',
    id: event.id,
    source: `cardpoller-simulator/${account}`,
    type: `cardpoller.card.${event.type}`,
    subject: event.iccid,
    time: event.observedAt,
    datacontenttype: 'application/json',
    data: { observation: event.observation, changedAt: event.changedAt },
  };
}

/** Delay a `Retry-After` header asks for (seconds or an HTTP date), if it is readable. */
function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with jitter; Math.random, not the world's PRNG: seeded runs stay the same. */
function backoffMs(attempts: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempts - 1)) * (0.5 + Math.random() / 2);
}

/** Pushes one account's events with one set of settings; a new `PUT` makes a new one. */
export class Pusher {
  private window: PushedChange[] = [];
  private windowTimer: NodeJS.Timeout | undefined;
  private readonly queued: Delivery[] = [];
  private readonly retrying = new Map<NodeJS.Timeout, Delivery>();
  private inflight = 0;
  private pumpScheduled = false;
  private stopped = false;
  private readonly controller = new AbortController();

  constructor(
    private readonly account: string,
    readonly settings: PushSettings,
    private readonly counters: PushCounters,
    /** The request carrying `changes` was answered 2xx at `at` (epoch ms). */
    private readonly onDelivered: (changes: readonly PushedChange[], at: number) => void,
  ) {}

  wants(type: GatewayCheckType): boolean {
    return !this.stopped && this.settings.types.includes(type);
  }

  push(change: PushedChange): void {
    if (!this.wants(change.event.type)) return;
    this.counters.sent += 1;
    if (this.settings.batchMs === 0) {
      this.enqueue([change], false);
      return;
    }
    this.window.push(change);
    if (this.window.length >= MAX_BATCH) this.flushWindow();
    else this.windowTimer ??= setTimeout(() => this.flushWindow(), this.settings.batchMs);
  }

  /** `DELETE` (or a new `PUT`): no new events; waiting ones are dropped; open requests finish, unretried. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    let waiting = this.window.length;
    for (const delivery of this.queued) waiting += delivery.changes.length;
    for (const [timer, delivery] of this.retrying) {
      clearTimeout(timer);
      waiting += delivery.changes.length;
    }
    this.counters.dropped += waiting;
    this.window = [];
    this.queued.length = 0;
    this.retrying.clear();
  }

  /** Reset or close: everything stops now, open requests too, and nothing more is reported. */
  abort(): void {
    this.stop();
    this.controller.abort();
  }

  private flushWindow(): void {
    clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    const changes = this.window;
    this.window = [];
    if (changes.length > 0) this.enqueue(changes, true);
  }

  private enqueue(changes: readonly PushedChange[], batch: boolean): void {
    if (this.queued.length >= MAX_QUEUED) {
      this.counters.dropped += changes.length;
      return;
    }
    const encoded = encodeEvents(
      this.account,
      changes.map((change) => change.event),
      batch,
      this.settings.format,
    );
    this.queued.push({ changes, ...encoded, deadline: Date.now() + DELIVERY_DEADLINE_MS, attempts: 0 });
    this.schedulePump();
  }

  /** Requests start on a later turn: a change made while answering a call never waits for them. */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Starts queued requests while slots are free. */
  private pump(): void {
    while (this.inflight < MAX_INFLIGHT) {
      const delivery = this.queued.shift();
      if (!delivery) return;
      if (Date.now() > delivery.deadline) this.counters.dropped += delivery.changes.length;
      else void this.send(delivery);
    }
  }

  private async send(delivery: Delivery): Promise<void> {
    this.inflight += 1;
    delivery.attempts += 1;
    const outcome = await this.attempt(delivery);
    this.inflight -= 1;
    // Reset or closed meanwhile: the world it would report to is gone.
    if (this.controller.signal.aborted) return;
    this.settle(delivery, outcome);
    this.pump();
  }

  private async attempt(delivery: Delivery): Promise<Outcome> {
    try {
      const res = await fetch(this.settings.url, {
        method: 'POST',
        headers: {
          'content-type': delivery.contentType,
          [ACCOUNT_HEADER]: this.account,
          [SIGNATURE_HEADER]: signEvents(this.settings.secret, delivery.body, Date.now()),
        },
        body: delivery.body,
        redirect: 'manual',
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
      });
      // The answer's status is what counts: learned at its arrival, before the body is read.
      const at = Date.now();
      // Read (and discard) the body so the connection can be reused; a broken body changes nothing.
      await res.arrayBuffer().catch(() => undefined);
      if (res.status >= 200 && res.status < 300) return { kind: 'delivered', at };
      if (res.status === 429) return { kind: 'retry', afterMs: retryAfterMs(res.headers.get('retry-after'), at) };
      if (res.status >= 500) return { kind: 'retry', afterMs: undefined };
      return { kind: 'refused' };
    } catch {
      // Connection refused or reset, DNS failure, timeout (an abort is handled by the caller).
      return { kind: 'retry', afterMs: undefined };
    }
  }

  private settle(delivery: Delivery, outcome: Outcome): void {
    const events = delivery.changes.length;
    if (outcome.kind === 'delivered') {
      this.counters.delivered += events;
      this.onDelivered(delivery.changes, outcome.at);
    } else if (outcome.kind === 'refused') this.counters.failed += events;
    else this.retryLater(delivery, outcome.afterMs ?? backoffMs(delivery.attempts));
  }

  private retryLater(delivery: Delivery, delayMs: number): void {
    // Stopped, or the retry would come after the deadline: give up now rather than later.
    if (this.stopped || Date.now() + delayMs > delivery.deadline) {
      this.counters.dropped += delivery.changes.length;
      return;
    }
    const timer = setTimeout(() => {
      this.retrying.delete(timer);
      this.counters.retried += delivery.changes.length;
      this.queued.unshift(delivery);
      this.pump();
    }, delayMs);
    this.retrying.set(timer, delivery);
  }
}
