/**
 * The recorded-history files under test/replay/histories/ (written by scripts/recordHistories.ts),
 * one per path a workflow can take. Each is readable JSON: the history as protobuf's JSON object
 * form (enum names, 64-bit numbers as strings), with every `json/plain` payload written out as the
 * value it carries (`{ "metadata": { "encoding": "json/plain" }, "json": … }`) instead of base64, so a reviewer
 * reads a diff. Loading turns it back into the exact bytes the server recorded.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';

// A CommonJS module: its namespace object comes as the default export.
const { temporal } = proto;
const { History } = temporal.api.history.v1;
type History = proto.temporal.api.history.v1.IHistory;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

export const HISTORIES_DIR = fileURLToPath(new URL('./histories/', import.meta.url));
export const EVENT_TYPE_PREFIX = 'EVENT_TYPE_';

export interface RecordedHistory {
  /** The path this history takes (test/replay/paths.ts): what the replay test checks it holds. */
  readonly path: string;
  readonly description: string;
  readonly workflowType: string;
  readonly workflowId: string;
  readonly runId: string;
  /** Event types in order (without the EVENT_TYPE_ prefix), for reading a file at a glance. */
  readonly events: readonly string[];
  /** The history: protobuf JSON object form, `json/plain` payloads readable (see the header). */
  readonly history: unknown;
}

export interface LoadedHistory {
  readonly file: string;
  readonly recorded: RecordedHistory;
  readonly history: History;
}

const JSON_PLAIN = 'json/plain';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (value: unknown): value is Record<string, Json> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A payload's JSON object form: `metadata` (base64 values) and `data` (base64), nothing else. */
function isPayload(value: Record<string, Json>): value is { metadata: Record<string, string>; data?: string } {
  const keys = Object.keys(value);
  return (
    isObject(value.metadata) &&
    Object.values(value.metadata).every((v) => typeof v === 'string') &&
    (value.data === undefined || typeof value.data === 'string') &&
    keys.every((key) => key === 'metadata' || key === 'data')
  );
}

function fromBase64Text(base64: string): string | undefined {
  const bytes = Buffer.from(base64, 'base64');
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) && bytes.toString('base64') === base64 ? text : undefined;
}

/** `json/plain` payload → `{ metadata (as text), json }` when that gives back the very same bytes; else as it is. */
function readablePayload(payload: { metadata: Record<string, string>; data?: string }): Json {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(payload.metadata)) {
    const text = fromBase64Text(value);
    if (text === undefined) return payload;
    metadata[key] = text;
  }
  const data = payload.data === undefined ? '' : fromBase64Text(payload.data);
  if (metadata.encoding !== JSON_PLAIN || data === undefined) return payload;
  let json: Json;
  try {
    json = JSON.parse(data) as Json;
  } catch {
    return payload;
  }
  if (JSON.stringify(json) !== data) return payload;
  return { metadata, json };
}

function rawPayload(value: Record<string, Json>): Json {
  const metadata: Record<string, string> = {};
  if (isObject(value.metadata))
    for (const [key, text] of Object.entries(value.metadata)) if (typeof text === 'string') metadata[key] = Buffer.from(text).toString('base64');
  return { metadata, data: Buffer.from(JSON.stringify(value.json)).toString('base64') };
}

const isReadablePayload = (value: Record<string, Json>): boolean => isObject(value.metadata) && value.metadata.encoding === JSON_PLAIN && 'json' in value;

function mapPayloads(value: Json, toReadable: boolean): Json {
  if (Array.isArray(value)) return value.map((item) => mapPayloads(item, toReadable));
  if (!isObject(value)) return value;
  if (toReadable && isPayload(value)) return readablePayload(value);
  if (!toReadable && isReadablePayload(value)) return rawPayload(value);
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapPayloads(item, toReadable)]));
}

const OBJECT_OPTIONS = { longs: String, enums: String, bytes: String } as const;

export function historyToReadable(history: History): unknown {
  const object: Json = History.toObject(History.fromObject(history), OBJECT_OPTIONS);
  return mapPayloads(object, true);
}

export function historyFromReadable(readable: unknown): History {
  return History.fromObject(mapPayloads(readable as Json, false) as Record<string, unknown>);
}

export function eventTypeName(event: HistoryEvent): string {
  return String(temporal.api.enums.v1.EventType[event.eventType ?? 0]).replace(EVENT_TYPE_PREFIX, '');
}

export function saveRecordedHistory(file: string, recorded: Omit<RecordedHistory, 'events' | 'history'>, history: History): RecordedHistory {
  const complete: RecordedHistory = { ...recorded, events: (history.events ?? []).map(eventTypeName), history: historyToReadable(history) };
  writeFileSync(file, `${JSON.stringify(complete, null, 1)}\n`);
  return complete;
}

export function loadRecordedHistories(dir = HISTORIES_DIR): LoadedHistory[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => {
      const recorded = JSON.parse(readFileSync(join(dir, file), 'utf8')) as RecordedHistory;
      return { file, recorded, history: historyFromReadable(recorded.history) };
    });
}
