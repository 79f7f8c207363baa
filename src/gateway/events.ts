/**
 * Pushed carrier events on the wire (docs/gateway-contract.md, 'Pushed events'): the body's two
 * formats (the contract's JSON, CloudEvents 1.0) read into one shape, and the HMAC signature that
 * authenticates a request. Pure: no I/O here.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { observationSchemas } from './contract.js';

export const EVENT_TYPES = ['card_status', 'carddata', 'realname'] as const;
export type EventCheckType = (typeof EVENT_TYPES)[number];

export const ACCOUNT_HEADER = 'x-cardpoller-account';
export const SIGNATURE_HEADER = 'x-cardpoller-signature';
/** How far a signature's `t` may be from this clock: a request captured and sent again later is refused. */
export const SIGNATURE_WINDOW_S = 300;
export const MAX_EVENTS_PER_REQUEST = 1000;
export const CLOUDEVENTS = 'application/cloudevents+json';
export const CLOUDEVENTS_BATCH = 'application/cloudevents-batch+json';
const CLOUDEVENT_TYPE_PREFIX = 'cardpoller.card.';

/** One event as the orchestrator stores it, whichever format it came in. */
export interface CarrierEvent {
  readonly id: string;
  readonly type: EventCheckType;
  readonly iccid: string;
  readonly observedAt: Date;
  readonly changedAt?: Date;
  readonly observation: Readonly<Record<string, unknown>>;
}

/** The body (or one event of it) is not what the contract says: `field` names where. */
export class EventInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'EventInputError';
  }
}

const isoDate = z.iso.datetime({ offset: true });
const eventId = z.string().min(1).max(200);
const iccid = z.string().min(1).max(40);

const contractEvent = z.object({
  id: eventId,
  type: z.enum(EVENT_TYPES),
  iccid,
  observedAt: isoDate,
  changedAt: isoDate.optional(),
  observation: z.record(z.string(), z.unknown()),
});

const cloudEvent = z.object({
  specversion: z.literal('1.0'),
  id: eventId,
  source: z.string().min(1),
  type: z.enum(EVENT_TYPES.map((t) => `${CLOUDEVENT_TYPE_PREFIX}${t}`) as [string, ...string[]]),
  subject: iccid,
  time: isoDate,
  data: z.object({ observation: z.record(z.string(), z.unknown()), changedAt: isoDate.optional() }),
});

function fieldOf(prefix: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>((at, key) => (typeof key === 'number' ? `${at}[${key}]` : `${at}.${String(key)}`), prefix);
}

function parsed<T>(schema: z.ZodType<T>, value: unknown, at: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new EventInputError(fieldOf(at, issue.path), `${fieldOf(at, issue.path)}: ${issue.message}`);
}

function withObservation(event: Omit<CarrierEvent, 'observation'>, observation: Record<string, unknown>, at: string): CarrierEvent {
  // The observation must be what a check's answer of that type would carry (the same rows follow from it).
  parsed<unknown>(observationSchemas[event.type], observation, at);
  return { ...event, observation };
}

function fromContract(value: unknown, at: string): CarrierEvent {
  const e = parsed(contractEvent, value, at);
  const base = { id: e.id, type: e.type, iccid: e.iccid, observedAt: new Date(e.observedAt), ...(e.changedAt ? { changedAt: new Date(e.changedAt) } : {}) };
  return withObservation(base, e.observation, `${at}.observation`);
}

function fromCloudEvent(value: unknown, at: string): CarrierEvent {
  const e = parsed(cloudEvent, value, at);
  const type = e.type.slice(CLOUDEVENT_TYPE_PREFIX.length) as EventCheckType;
  const base = { id: e.id, type, iccid: e.subject, observedAt: new Date(e.time), ...(e.data.changedAt ? { changedAt: new Date(e.data.changedAt) } : {}) };
  return withObservation(base, e.data.observation, `${at}.data.observation`);
}

/** The events of a request body by its content type; throws {@link EventInputError} naming the first bad field. */
export function parseEvents(contentType: string, raw: string): CarrierEvent[] {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new EventInputError('body', 'body: not JSON');
  }
  const kind = contentType.split(';', 1)[0]!.trim().toLowerCase();
  let events: CarrierEvent[];
  if (kind === CLOUDEVENTS) events = [fromCloudEvent(body, 'event')];
  else if (kind === CLOUDEVENTS_BATCH) {
    if (!Array.isArray(body)) throw new EventInputError('body', 'body: a CloudEvents batch is a JSON array');
    events = body.map((item, index) => fromCloudEvent(item, `events[${index}]`));
  } else if (typeof body === 'object' && body !== null && 'events' in body) {
    const list = body.events;
    if (!Array.isArray(list)) throw new EventInputError('events', 'events: must be an array');
    events = list.map((item, index) => fromContract(item, `events[${index}]`));
  } else events = [fromContract(body, 'event')];
  if (events.length === 0) throw new EventInputError('events', 'events: at least one event');
  if (events.length > MAX_EVENTS_PER_REQUEST)
    throw new EventInputError('events', `events: at most ${MAX_EVENTS_PER_REQUEST} per request (got ${events.length})`);
  return events;
}

/** The signature header's value for a body signed at `nowMs`. */
export function signEvents(secret: string, body: string, nowMs: number): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
}

export type SignatureCheck = 'ok' | 'missing' | 'malformed' | 'outside_window' | 'mismatch';

export function verifySignature(header: string | undefined, secret: string, body: string, nowMs: number): SignatureCheck {
  if (header === undefined || header === '') return 'missing';
  const parts = new Map(header.split(',').map((part) => part.trim().split('=', 2) as [string, string | undefined]));
  const t = Number(parts.get('t'));
  const v1 = parts.get('v1');
  if (!Number.isInteger(t) || v1 === undefined || !/^[0-9a-f]{64}$/i.test(v1)) return 'malformed';
  if (Math.abs(nowMs / 1000 - t) > SIGNATURE_WINDOW_S) return 'outside_window';
  const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(v1, 'hex')) ? 'ok' : 'mismatch';
}
