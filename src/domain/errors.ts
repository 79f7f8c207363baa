/**
 * The one error type for bad input and missing or conflicting data. The API maps it to
 * `{ error: { code, message, field? } }`: not_found → 404, conflict → 409, invalid → 400.
 */
export type DomainErrorCode = 'not_found' | 'conflict' | 'invalid';

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** The input field at fault, in the API's camelCase spelling (e.g. `groups[1].qps`). */
    readonly field?: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }

  static notFound(field: string, message: string): DomainError {
    return new DomainError('not_found', message, field);
  }

  static conflict(field: string, message: string): DomainError {
    return new DomainError('conflict', message, field);
  }

  static invalid(field: string, message: string): DomainError {
    return new DomainError('invalid', message, field);
  }
}

export function isDomainError(error: unknown): error is DomainError {
  return error instanceof DomainError;
}
