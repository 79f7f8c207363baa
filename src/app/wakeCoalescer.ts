/**
 * At most one wake-up in flight per key, the callers that arrive meanwhile sharing the next one: a
 * burst of request-checks on one account (an operator re-checking a customer's cards) sent one
 * `priorityRequested` update each, 500 at once, and that account's scheduler had two workflow
 * tasks time out (30 s each) under them and claimed nothing for a minute (issue 45). One wake-up
 * claims every card the requests put in the priority lane, so each caller needs only a wake-up
 * sent after its own request was written: the one in flight may have started before it.
 */
interface Waiter {
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

interface KeyState {
  sending: boolean;
  /** Callers whose request was written after the wake-up in flight started: the next one is theirs. */
  next: Waiter[];
}

export class WakeCoalescer {
  private readonly keys = new Map<string, KeyState>();
  /** Wake-ups sent so far (all keys). */
  sent = 0;

  /** Resolves once a wake-up sent after this call has been accepted (rejects with that wake-up's error). */
  wake(key: string, send: () => Promise<void>): Promise<void> {
    let state = this.keys.get(key);
    if (state === undefined) {
      state = { sending: false, next: [] };
      this.keys.set(key, state);
    }
    const waiting = new Promise<void>((resolve, reject) => state.next.push({ resolve, reject }));
    if (!state.sending) void this.drain(key, state, send);
    return waiting;
  }

  private async drain(key: string, state: KeyState, send: () => Promise<void>): Promise<void> {
    state.sending = true;
    while (state.next.length > 0) {
      const batch = state.next.splice(0, state.next.length);
      this.sent += 1;
      try {
        await send();
        for (const waiter of batch) waiter.resolve();
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
      }
    }
    state.sending = false;
    this.keys.delete(key);
  }
}
