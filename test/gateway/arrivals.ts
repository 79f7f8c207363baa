/**
 * Sends beside arrivals: what the limiter decided (when each call left its process) and what the
 * simulator saw (when its handler read each call). The limiter's promise is on the first: any
 * `qps` + 1 sends span at least one window plus ARRIVAL_ALLOWANCE_MS (a call is sent no later than
 * its slot's margin minus the allowance), so a carrier that reads each call within the allowance of
 * its send never counts more than `qps` in a second. The simulator shares this machine's CPU: when
 * its event loop reads calls late it can count more, and the busiest second's calls say which it was.
 */
import { GatewayClient, type GatewayCallOptions, type GatewayObservation } from '../../src/gateway/client.js';
import type { GatewayCheckType } from '../../src/workflow-safe/checkTypes.js';
import { ARRIVAL_ALLOWANCE_MS } from '../../src/ratelimit/sendDelay.js';
import type { GroupStats } from '../../src/simulator/model.js';

const ONE_SECOND_MS = 1000;

export interface SentCall {
  /** The requestId it carried, `<iccid>#<n>`: the simulator's label for it. */
  readonly call: string;
  /** When it was written to its socket (epoch ms). */
  readonly at: number;
}

/** The production client, naming each call of `account` and noting when it was sent. */
export class RecordingClient extends GatewayClient {
  readonly sends: SentCall[] = [];
  private readonly callsPerCard = new Map<string, number>();

  constructor(
    options: ConstructorParameters<typeof GatewayClient>[0],
    private readonly account: string,
  ) {
    super(options);
  }

  override check<T extends GatewayCheckType>(
    type: T,
    request: { readonly account: string; readonly iccid: string },
    options: GatewayCallOptions = {},
  ): Promise<GatewayObservation<T>> {
    if (request.account !== this.account) return super.check(type, request, options);
    const n = (this.callsPerCard.get(request.iccid) ?? 0) + 1;
    this.callsPerCard.set(request.iccid, n);
    const call = `${request.iccid}#${n}`;
    return super.check(type, request, {
      ...options,
      requestId: call,
      onSend: (at) => {
        this.sends.push({ call, at });
        options.onSend?.(at);
      },
    });
  }
}

/** Most of `times` within any half-open window of `windowMs` (two share one when they differ by less). */
export function densest(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end += 1) {
    while (sorted[end]! - sorted[start]! >= windowMs) start += 1;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

export interface ArrivalVerdict {
  /** Most sends within one window plus the allowance: the limiter's own figure, at most `qps`. */
  readonly densestSends: number;
  /** The simulator's busiest second: each call with how long after its send the simulator read it. */
  readonly busiest: readonly { readonly call: string; readonly readAfterMs: number | undefined }[];
  /** Most of the busiest second's calls within one second had each been read within the allowance. */
  readonly busiestReadOnTime: number;
  /** Empty when the limiter kept its promise and the carrier's count is explained; else why not. */
  readonly problems: readonly string[];
}

/**
 * Judges a run against the limiter's promise: the sends must hold it; the simulator may count more
 * than `qps` in a second only as far as it read calls of that second later than the allowance
 * after their send — moved back to send + allowance, they must not exceed `qps`.
 */
export function judgeArrivals(group: GroupStats, sends: readonly SentCall[], qps: number): ArrivalVerdict {
  const sentAt = new Map(sends.map((s) => [s.call, s.at]));
  const densestSends = densest(
    sends.map((s) => s.at),
    ONE_SECOND_MS + ARRIVAL_ALLOWANCE_MS,
  );
  const busiest = group.busiestSecond.map((entry) => {
    const at = sentAt.get(entry.call);
    return {
      call: entry.call,
      arrivedAtMs: entry.arrivedAtMs,
      sentAtMs: at,
      readAfterMs: at === undefined ? undefined : Math.round((entry.arrivedAtMs - at) * 10) / 10,
    };
  });
  const unknown = busiest.filter((b) => b.sentAtMs === undefined).map((b) => b.call);
  const busiestReadOnTime = densest(
    busiest.map((b) => (b.sentAtMs === undefined ? b.arrivedAtMs : Math.min(b.arrivedAtMs, b.sentAtMs + ARRIVAL_ALLOWANCE_MS))),
    ONE_SECOND_MS,
  );
  const problems: string[] = [];
  if (densestSends > qps) problems.push(`${densestSends} calls were sent within ${ONE_SECOND_MS + ARRIVAL_ALLOWANCE_MS} ms (limit ${qps})`);
  if (unknown.length > 0) problems.push(`the simulator saw calls no caller sent: ${unknown.join(', ')}`);
  if (busiestReadOnTime > qps) {
    const listed = busiest.map((b) => ({ call: b.call, readAfterMs: b.readAfterMs }));
    problems.push(
      `the simulator saw ${group.maxPerSecond} calls in one second (limit ${qps}), ${busiestReadOnTime} of them even if each was read within ${ARRIVAL_ALLOWANCE_MS} ms of its send: ${JSON.stringify(listed)}`,
    );
  }
  return { densestSends, busiest: busiest.map((b) => ({ call: b.call, readAfterMs: b.readAfterMs })), busiestReadOnTime, problems };
}
