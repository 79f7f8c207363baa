/**
 * Adapts a pino logger to the Temporal SDK's Logger interface, so the Runtime's logger (SDK,
 * workflow and activity context logs, and core logs when forwarded) writes the same JSON lines as
 * the rest of the process. The SDK's metadata (workflowId, activityType, sdkComponent…) becomes
 * top-level fields of the line.
 */
import type { LogLevel, LogMetadata, Logger as SdkLogger } from '@temporalio/worker';
import type { Logger as PinoLogger, LevelWithSilent } from 'pino';

const PINO_LEVEL: Readonly<Record<LogLevel, Exclude<LevelWithSilent, 'silent' | 'fatal'>>> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The SDK level that lets through what the pino logger would write (core filters before forwarding). */
export const SDK_LOG_LEVEL: Readonly<Record<LevelWithSilent, LogLevel>> = {
  fatal: 'ERROR',
  error: 'ERROR',
  warn: 'WARN',
  info: 'INFO',
  debug: 'DEBUG',
  trace: 'TRACE',
  silent: 'ERROR',
};

/** Drops symbol keys (the SDK's timestamp) that JSON cannot carry; pino stamps its own time. */
function fields(meta: LogMetadata | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!meta) return out;
  for (const key of Object.keys(meta)) out[key] = (meta as Record<string, unknown>)[key];
  return out;
}

export class PinoSdkLogger implements SdkLogger {
  constructor(private readonly logger: PinoLogger) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.logger[PINO_LEVEL[level]](fields(meta), message);
  }
  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}
