/** Parses an HTTP `Retry-After` header (delta seconds or HTTP date) into milliseconds from now. */
export function parseRetryAfter(header: string | undefined, nowMs: number): number | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const trimmed = header.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}
