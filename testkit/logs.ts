/**
 * A real pino logger whose lines a test reads back, for code that takes a process logger
 * (src/runtime/logger.ts): the lines are the JSON a process would write, parsed.
 */
import { pino } from 'pino';
import type { ProcessLogger } from '../src/runtime/logger.js';

export interface LogLine {
  /** `error`, `warn`, `info`, … */
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface CapturedLogs {
  readonly logger: ProcessLogger;
  /** Every line written so far. */
  lines(this: void): LogLine[];
}

export function captureLogs(level = 'debug'): CapturedLogs {
  const lines: LogLine[] = [];
  const logger = pino(
    { level, base: null, timestamp: false, formatters: { level: (label) => ({ level: label }) } },
    { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
  );
  return { logger, lines: () => [...lines] };
}
