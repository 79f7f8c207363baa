/** Small input checks that throw {@link DomainError} naming the field. */
import { idProblem, isId } from '../workflow-safe/ids.js';
import { DomainError } from './errors.js';

/** The offending value in an error message, cut short. */
export function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Ids are bigint identity values exposed as decimal strings (the rule: src/workflow-safe/ids.ts). */
export function requireId(value: unknown, field: string): string {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (!isId(text)) throw DomainError.invalid(field, `${field} ${idProblem(value) ?? ''}`);
  return text;
}

export function requireText(value: unknown, field: string, maxLength = 200): string {
  if (typeof value !== 'string' || value.trim().length === 0) throw DomainError.invalid(field, `${field} must be a non-empty string`);
  if (value.length > maxLength) throw DomainError.invalid(field, `${field} must be at most ${maxLength} characters`);
  return value.trim();
}

export function requireInt(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw DomainError.invalid(field, `${field} must be an integer between ${min} and ${max}, got ${shown(value)}`);
  }
  return value;
}

export function requireNumber(value: unknown, field: string, min: number, max: number, exclusiveMin = false): number {
  const tooLow = typeof value === 'number' && (exclusiveMin ? value <= min : value < min);
  if (typeof value !== 'number' || !Number.isFinite(value) || tooLow || value > max) {
    throw DomainError.invalid(field, `${field} must be a number ${exclusiveMin ? '>' : '>='} ${min} and <= ${max}, got ${shown(value)}`);
  }
  return value;
}

export function requireBoolean(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') throw DomainError.invalid(field, `${field} must be true or false`);
  return value;
}
