/** Claim-round answers for tests that script the scheduler's control activities. */
import type { ClaimRoundResult, ClaimedCard } from '../src/workflow-safe/claimRound.js';

/** A claim round's answer with `cards` claimed (child start mode, one card per run, unless `extra` says otherwise). */
export function claimedRound(cards: readonly ClaimedCard[], extra: Partial<Extract<ClaimRoundResult, { kind: 'claimed' }>> = {}): ClaimRoundResult {
  return {
    kind: 'claimed',
    claimed: cards,
    expired: 0,
    running: cards.length,
    lanes: { priority: 0, normal: cards.length },
    groups: [],
    startedByClaim: false,
    startFailures: 0,
    engine: { starts: 0, lagSumMs: 0 },
    limitedBy: 'none',
    maxInflightLimit: 100,
    budgetQps: 10,
    leaseMs: 20_000,
    dueHorizonMs: 0,
    runShape: 'card',
    batchSize: 50,
    ...extra,
  };
}
