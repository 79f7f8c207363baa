/**
 * The Temporal dev server's Go heap, from its Prometheus `/metrics` (TEMPORAL_DEV_METRICS_PORT).
 * Temporal reports the Go runtime's memory once per service; the four services share one process,
 * so any one service's figures are the process's.
 */

export interface GoHeap {
  /** Bytes in heap objects, live and not yet collected (`memory_heap`): its floor over a stretch of samples is what the server keeps. */
  readonly allocatedBytes: number;
  /** Memory the heap and the goroutine stacks hold from the OS: spans in use, idle spans not yet released, stacks. */
  readonly heldBytes: number;
}

const FIGURES = ['heap', 'heapinuse', 'heapidle', 'heapreleased', 'stack'] as const;
type Figure = (typeof FIGURES)[number];
const LINE = /^memory_(heap|heapinuse|heapidle|heapreleased|stack)\{service_name="frontend"\} (\S+)$/gm;

/** The Go heap figures of a `/metrics` text; null when any is missing. */
export function parseGoHeap(text: string): GoHeap | null {
  const found = new Map<Figure, number>();
  for (const match of text.matchAll(LINE)) {
    const value = Number(match[2]);
    if (Number.isFinite(value)) found.set(match[1] as Figure, value);
  }
  if (FIGURES.some((figure) => !found.has(figure))) return null;
  const get = (figure: Figure): number => found.get(figure) ?? 0;
  return { allocatedBytes: get('heap'), heldBytes: get('heapinuse') + get('heapidle') - get('heapreleased') + get('stack') };
}

/** Reads the server's Go heap; null when its `/metrics` does not answer (a server started without the fixed port). */
export async function readGoHeap(metricsUrl: string, timeoutMs = 5_000): Promise<GoHeap | null> {
  try {
    const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(timeoutMs) });
    return response.ok ? parseGoHeap(await response.text()) : null;
  } catch {
    return null;
  }
}
