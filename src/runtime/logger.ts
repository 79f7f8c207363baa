/**
 * Process loggers: pino JSON lines on stdout, one `service` field per process kind, at the
 * configured LOG_LEVEL.
 */
import { pino, type Logger } from 'pino';
import type { Config } from '../config/index.js';

export type ProcessLogger = Logger;

export function createProcessLogger(config: Pick<Config, 'LOG_LEVEL'>, service: string): ProcessLogger {
  return pino({ level: config.LOG_LEVEL, base: { service, pid: process.pid } });
}

/**
 * A child that writes at `info` whatever LOG_LEVEL says (unless `silent`): lifecycle lines
 * ("workers running", "stopping") are what supervisors and tests wait for.
 */
export function lifecycleLogger(logger: ProcessLogger): ProcessLogger {
  return logger.level === 'silent' ? logger : logger.child({}, { level: 'info' });
}
