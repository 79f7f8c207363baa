/**
 * The V8 heaps of this process's worker threads. The Temporal SDK runs workflow code in worker
 * threads of its own, each with a heap that process.memoryUsage() does not count: a diagnostic
 * report (process.report) asks every thread for its heap figures.
 */

export interface ThreadHeaps {
  readonly threads: number;
  /**
   * Old-generation heap in use now, all threads: live objects and garbage not yet collected. The
   * young generation (filled and emptied many times a second) is left out: what it holds is either
   * garbage or soon promoted here.
   */
  readonly usedBytes: number;
  /** Heap the threads hold in memory (V8's physical heap size: committed and resident). */
  readonly physicalBytes: number;
}

interface ReportedHeap {
  readonly usedMemory?: unknown;
  readonly totalCommittedMemory?: unknown;
  readonly heapSpaces?: Readonly<Record<string, { readonly used?: unknown } | undefined>>;
}

const YOUNG_SPACES = ['new_space', 'new_large_object_space'] as const;

const bytes = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/** Sums the worker threads' heaps of a diagnostic report (exported for tests). */
export function threadHeapsOf(report: object): ThreadHeaps {
  const workers = (report as { workers?: unknown }).workers;
  const heaps = Array.isArray(workers) ? workers.map((w: unknown) => (w as { javascriptHeap?: ReportedHeap } | null)?.javascriptHeap ?? {}) : [];
  return {
    threads: heaps.length,
    usedBytes: heaps.reduce((n, heap) => n + bytes(heap.usedMemory) - YOUNG_SPACES.reduce((y, space) => y + bytes(heap.heapSpaces?.[space]?.used), 0), 0),
    physicalBytes: heaps.reduce((n, heap) => n + bytes(heap.totalCommittedMemory), 0),
  };
}

/** This process's worker threads' heaps now (a report takes a few ms: sample it every few seconds, not faster). */
export function workerThreadHeaps(): ThreadHeaps {
  // Network interfaces and the environment are the slow, irrelevant parts of a report.
  const settings = process.report as typeof process.report & { excludeNetwork: boolean };
  settings.excludeNetwork = true;
  settings.excludeEnv = true;
  return threadHeapsOf(process.report.getReport());
}
