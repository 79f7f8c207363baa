/**
 * A process's stop as named steps run one after the other, each with a time limit: a step that
 * has not ended by then is named in the log and the stop gives up there, so its caller can exit
 * anyway (status 1) instead of hanging on a promise that never settles. A step that fails is
 * logged and the stop goes on: the steps after it still release what they hold.
 */
export interface StopStep {
  /** What the step stops, as the log names it ("the workers"). */
  readonly name: string;
  run(): Promise<void>;
}

export interface StopInOrderOptions {
  /** How long one step may take. */
  readonly stepLimitMs: number;
  readonly log: (line: string) => void;
}

/** 'stopped' when every step ended (some may have failed); otherwise the step that did not end in time. */
export type StopOutcome = { readonly kind: 'stopped' } | { readonly kind: 'stuck'; readonly step: string };

export async function stopInOrder(steps: readonly StopStep[], options: StopInOrderOptions): Promise<StopOutcome> {
  for (const step of steps) {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<'stuck'>((resolve) => (timer = setTimeout(() => resolve('stuck'), options.stepLimitMs)));
    const ran = step.run().then(
      () => 'ended' as const,
      (error: unknown) => {
        options.log(`stopping ${step.name} failed: ${error instanceof Error ? error.message : String(error)}`);
        return 'ended' as const;
      },
    );
    const outcome = await Promise.race([ran, limit]);
    clearTimeout(timer);
    if (outcome === 'stuck') {
      options.log(`stopping ${step.name} has not ended after ${options.stepLimitMs / 1000} s; giving up the stop there`);
      return { kind: 'stuck', step: step.name };
    }
  }
  return { kind: 'stopped' };
}
