/** The recorded-history files under test/replay/histories/ (written by scripts/recordHistories.ts). */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';

// A CommonJS module: its namespace object comes as the default export.
const { temporal } = proto;

export const HISTORIES_DIR = fileURLToPath(new URL('./histories/', import.meta.url));
export const EVENT_TYPE_PREFIX = 'EVENT_TYPE_';

export interface RecordedHistory {
  readonly workflowId: string;
  readonly workflowType: string;
  /** Event types in order, for reading a file without decoding it. */
  readonly events: readonly string[];
  readonly historyBase64: string;
}

export interface LoadedHistory {
  readonly file: string;
  readonly recorded: RecordedHistory;
  readonly history: proto.temporal.api.history.v1.History;
}

export function loadRecordedHistories(dir = HISTORIES_DIR): LoadedHistory[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => {
      const recorded = JSON.parse(readFileSync(join(dir, file), 'utf8')) as RecordedHistory;
      return { file, recorded, history: temporal.api.history.v1.History.decode(Buffer.from(recorded.historyBase64, 'base64')) };
    });
}
