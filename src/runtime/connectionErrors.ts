/**
 * The 'error' handler of every long-lived connection (pg pools and clients, ioredis).
 *
 * Node throws an 'error' event nobody listens to, so without this handler a PostgreSQL restart
 * that closes one idle pooled connection kills the whole process. A lost connection is not a reason
 * to stop: the pool opens a new one for the next query, ioredis reconnects by itself, and the
 * queries that meet the outage fail with an error their caller handles. What is left for the
 * handler is telling the operator, without flooding the log: ioredis reports every failed
 * reconnect attempt (one every ≤ 2 s for as long as the outage lasts) and a pool reports every
 * connection it loses, so one line is written per interval and the rest are counted.
 *
 * The lines go through the process' logger: an error at `error`, the recovery at `info`, each with
 * the connection's label and the count of errors not shown. One wording for PostgreSQL and Redis.
 */
import { defaultLogger, type LogSink } from './logger.js';

/** What a connection error log writes through (a process logger or a child of it). */
export type ConnectionLogger = Pick<LogSink, 'error' | 'info'>;

export interface ConnectionErrorLogOptions {
  /** At most one line per this many milliseconds (the first error is always written at once). */
  readonly everyMs?: number;
  /** The process' logger (default: {@link defaultLogger}). */
  readonly logger?: ConnectionLogger;
  readonly now?: () => number;
}

/** Something that emits connection errors (pg.Pool, pg.Client, ioredis' Redis). */
export interface ErrorEmitter {
  on(event: 'error', listener: (error: Error) => void): unknown;
}

const DEFAULT_EVERY_MS = 10_000;

/** `connect ECONNREFUSED 127.0.0.1:6379`, `terminating connection … [57P01]`. */
export function describeConnectionError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // net reports one failed attempt per resolved address (localhost → ::1 and 127.0.0.1) as an
  // AggregateError whose own message is empty.
  const message = error.message !== '' ? error.message : error instanceof AggregateError ? error.errors.map(describeConnectionError).join('; ') : error.name;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && !message.includes(code) ? `${message} [${code}]` : message;
}

export class ConnectionErrorLog {
  private readonly everyMs: number;
  private readonly logger: ConnectionLogger;
  private readonly now: () => number;
  private lastWrittenAt = Number.NEGATIVE_INFINITY;
  private unreported = 0;
  private failing = false;

  constructor(
    /** Names the connection in every line, e.g. `postgres(workers-card)`. */
    readonly label: string,
    options: ConnectionErrorLogOptions = {},
  ) {
    this.everyMs = options.everyMs ?? DEFAULT_EVERY_MS;
    this.logger = options.logger ?? defaultLogger();
    this.now = options.now ?? Date.now;
  }

  /** Writes the error, or counts it when a line was written less than `everyMs` ago. */
  error(error: unknown): void {
    this.failing = true;
    const now = this.now();
    if (now - this.lastWrittenAt < this.everyMs) {
      this.unreported += 1;
      return;
    }
    this.lastWrittenAt = now;
    const description = describeConnectionError(error);
    const unreported = this.takeUnreported();
    this.logger.error({ connection: this.label, error: description, unreported }, `${this.label}: connection error: ${description}${notShown(unreported)}`);
  }

  /** A connection works again: one line after errors, none otherwise. */
  recovered(): void {
    if (!this.failing) return;
    this.failing = false;
    const unreported = this.takeUnreported();
    this.logger.info({ connection: this.label, unreported }, `${this.label}: connected again${notShown(unreported)}`);
    // The next outage's first error is news: write it at once.
    this.lastWrittenAt = Number.NEGATIVE_INFINITY;
  }

  private takeUnreported(): number {
    const count = this.unreported;
    this.unreported = 0;
    return count;
  }
}

const notShown = (count: number): string => (count === 0 ? '' : ` (${count} more error${count === 1 ? '' : 's'} not shown)`);

/** Attaches a rate-limited logging 'error' handler to `emitter` and returns its log. */
export function logConnectionErrors(emitter: ErrorEmitter, label: string, options: ConnectionErrorLogOptions = {}): ConnectionErrorLog {
  const log = new ConnectionErrorLog(label, options);
  emitter.on('error', (error) => log.error(error));
  return log;
}
