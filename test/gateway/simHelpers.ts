/** Small helpers for tests that drive the simulator through its /sim endpoints. */
import type { AccountUpdate, SimStats } from '../../src/simulator/model.js';

export async function configureAccount(simUrl: string, account: string, update: AccountUpdate): Promise<void> {
  const res = await fetch(`${simUrl}/sim/accounts/${encodeURIComponent(account)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(update),
  });
  if (res.status !== 200) throw new Error(`PUT account answered ${res.status}: ${await res.text()}`);
}

export async function simStats(simUrl: string): Promise<SimStats> {
  const res = await fetch(`${simUrl}/sim/stats`);
  if (res.status !== 200) throw new Error(`GET stats answered ${res.status}`);
  return (await res.json()) as SimStats;
}

export async function setCardState(simUrl: string, iccid: string, state: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${simUrl}/sim/cards/${encodeURIComponent(iccid)}/state`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(state),
  });
  if (res.status !== 200) throw new Error(`POST card state answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

export function groupStats(stats: SimStats, account: string, group: string): { calls: number; rejected: number; maxPerSecond: number } {
  return stats.accounts[account]?.groups[group] ?? { calls: 0, rejected: 0, maxPerSecond: 0 };
}
