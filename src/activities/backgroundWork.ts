/**
 * Work an activity hands off to finish after it has returned — a claim round's run starts that
 * outlast the round's wait for them (src/activities/control.ts) — kept track of so the process
 * awaits it before it closes the connections that work uses.
 */

type Log = (message: string, fields: Record<string, unknown>) => void;

export class BackgroundWork {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly log: Log) {}

  /** Work still under way. */
  get size(): number {
    return this.pending.size;
  }

  /** Lets `work` run to its end beside the caller; a failure is logged (`what` names it), never thrown. */
  track(what: string, work: Promise<unknown>): void {
    const done: Promise<void> = work.then(
      () => undefined,
      (error: unknown) => this.log(`${what} failed after its activity returned`, { error: String(error) }),
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }

  /** Resolves once everything tracked so far has ended, or after `timeoutMs`; returns how much was still under way then. */
  async settle(timeoutMs: number): Promise<number> {
    if (this.pending.size === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.allSettled([...this.pending]), timeout]);
    clearTimeout(timer);
    return this.pending.size;
  }
}
