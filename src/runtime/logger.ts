/**
 * Process loggers: pino JSON lines on stdout, one `service` field per process kind, at the
 * configured LOG_LEVEL. Every line a process writes goes through one (docs/design.md "13.
 * Operating it"); only the CLI (src/cli) prints plain text, for the person at the terminal.
 */
import { pino, type Logger } from 'pino';
import type { Config } from '../config/index.js';

export type ProcessLogger = Logger;

/** The part of a process logger the modules that log take (a child of it, or a test's capture). */
export type LogSink = Pick<ProcessLogger, 'error' | 'warn' | 'info' | 'debug'>;

export function createProcessLogger(config: Pick<Config, 'LOG_LEVEL'>, service: string): ProcessLogger {
  return pino({ level: config.LOG_LEVEL, base: { service, pid: process.pid } });
}

let fallback: ProcessLogger | undefined;

/**
 * The logger of code that was handed none: what runs outside a process entry (tests, benches,
 * development tools) and a configuration error, before LOG_LEVEL is known. The same JSON lines at
 * `info`; process entries pass their own logger instead.
 */
export function defaultLogger(): ProcessLogger {
  fallback ??= createProcessLogger({ LOG_LEVEL: 'info' }, 'card-poller');
  return fallback;
}

/**
 * A child that writes at `info` whatever LOG_LEVEL says (unless `silent`): lifecycle lines
 * ("workers running", "stopping") are what supervisors and tests wait for.
 */
export function lifecycleLogger(logger: ProcessLogger): ProcessLogger {
  return logger.level === 'silent' ? logger : logger.child({}, { level: 'info' });
}
