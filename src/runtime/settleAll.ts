/**
 * `Promise.all` that waits for every promise to settle before it rejects with the first failure.
 * A read that fails early (PostgreSQL or Redis away, or closing at shutdown) must not leave a
 * Temporal query beside it running: the client's retry interceptor re-issues a failed call from a
 * timer, so a query outliving its caller can meet a connection closed meanwhile ("Channel has been
 * shut down") after the request, the sampler tick or the process it belonged to has ended.
 */
export async function settleAll<T extends readonly unknown[]>(promises: { readonly [K in keyof T]: PromiseLike<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(promises as readonly PromiseLike<unknown>[]);
  const failed = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
