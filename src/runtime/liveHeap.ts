/**
 * What a Node process keeps alive: its heap in use plus external memory (buffers) right after its
 * latest major (mark-sweep-compact) garbage collection. Resident memory also holds what the
 * collector has not given back yet, so it grows and shrinks with the heap's sizing; memory that is
 * still reachable after a major collection is what a leak accumulates.
 */
import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

export interface ProcessMemory {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  /** Heap used + external right after the latest major collection; null before the first one. */
  readonly liveBytes: number | null;
  readonly majorCollections: number;
}

let liveBytes: number | null = null;
let majorCollections = 0;
let observer: PerformanceObserver | undefined;

// (Node 16+ puts the collection's kind in `detail`; @types/node's PerformanceEntry does not declare it.)
const isMajor = (entry: PerformanceEntry): boolean =>
  (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR;

/** Starts following major collections in this process (once; later calls do nothing). */
export function watchLiveHeap(): void {
  if (observer) return;
  observer = new PerformanceObserver((list) => {
    if (!list.getEntries().some(isMajor)) return;
    const usage = process.memoryUsage();
    liveBytes = usage.heapUsed + usage.external;
    majorCollections += 1;
  });
  observer.observe({ entryTypes: ['gc'] });
}

/** This process' memory now, and what it kept alive at its latest major collection (see watchLiveHeap). */
export function processMemory(): ProcessMemory {
  const usage = process.memoryUsage();
  return { rssBytes: usage.rss, heapUsedBytes: usage.heapUsed, liveBytes, majorCollections };
}
