/**
 * Gathers the calls made in one turn of the event loop into one call of a batch function: a batch
 * run's bookkeeping flush makes its cards' calls together (src/activities/bookkeepingBatch.ts),
 * so fifty card-row reads or fifty record writes become one SQL statement each instead of fifty
 * (docs/capacity.md: PostgreSQL CPU per check). A lone call waits one `setImmediate`, nothing more.
 *
 * `run` gets the inputs in call order and returns one output per input, in the same order; when
 * it throws, every call of that batch gets the error.
 */
export function sameTurnBatcher<I, O>(run: (inputs: readonly I[]) => Promise<readonly O[]>): (input: I) => Promise<O> {
  let pending: { input: I; resolve(output: O): void; reject(error: unknown): void }[] = [];

  const flush = (): void => {
    const batch = pending;
    pending = [];
    // Through a promise, so a `run` that throws before returning one rejects the batch too.
    Promise.resolve(batch.map((call) => call.input))
      .then(run)
      .then(
        (outputs) => {
          for (const [index, call] of batch.entries()) {
            if (index < outputs.length) call.resolve(outputs[index] as O);
            else call.reject(new Error(`batch function returned ${outputs.length} outputs for ${batch.length} inputs`));
          }
        },
        (error: unknown) => {
          for (const call of batch) call.reject(error);
        },
      );
  };

  return (input) =>
    new Promise<O>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ input, resolve, reject });
    });
}
