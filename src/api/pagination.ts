/** Cursor pagination shared by the list routes: `{ items, nextCursor? }`. */
import { DomainError } from '../domain/errors.js';
import { isId } from '../workflow-safe/ids.js';

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export const pageQuerySchema = {
  cursor: { type: 'string', maxLength: 200, description: 'nextCursor of the previous page' },
  limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE },
} as const;

export interface Page<T> {
  readonly items: T[];
  readonly nextCursor?: string;
}

/**
 * Cursors are opaque to clients: base64url of the last item's sort key. Encoding keeps callers
 * from building cursors by hand, so the key can change without breaking scripts.
 */
export function encodeCursor(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

/** What a cursor's key must look like: a RegExp, or any `test` (e.g. {@link ID_CURSOR}). */
export interface CursorKey {
  test(key: string): boolean;
}

export function decodeCursor(cursor: string | undefined, pattern: CursorKey): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!pattern.test(key)) throw DomainError.invalid('cursor', 'cursor is not a nextCursor this API returned');
  return key;
}

/** `rows` was fetched with limit + 1: the extra row only tells that another page exists. */
export function pageOf<T>(rows: readonly T[], limit: number, keyOf: (item: T) => string): Page<T> {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return rows.length > limit && last !== undefined ? { items, nextCursor: encodeCursor(keyOf(last)) } : { items };
}

/** The key of lists paged by id: an id the database holds (a larger one would fail the query). */
export const ID_CURSOR: CursorKey = { test: isId };
