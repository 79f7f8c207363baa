/**
 * The simulator's control and measuring endpoints (`/sim/*`, docs/gateway-contract.md) over HTTP:
 * how a process configures and reads a simulator running elsewhere, e.g. in a process of its own
 * (src/simulator/childProcess.ts).
 */
import type { AccountSettings, AccountUpdate, CardStateUpdate, SimStats } from './model.js';
import type { NetworkState, RealnameState } from '../gateway/contract.js';

/** Answer of `POST /sim/cards/<iccid>/state`: the card as it is now. */
export interface SimCardState {
  readonly network: NetworkState;
  readonly pendingNetwork: { readonly state: NetworkState; readonly at: number } | null;
  readonly realname: RealnameState;
  readonly usageKb: number;
}

export interface SimulatorControl {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** `GET /sim/stats`; `cards: false` leaves the per-card figures out (cheaper with many cards). */
  stats(options?: { readonly cards?: boolean }): Promise<SimStats>;
  /** `PUT /sim/accounts/<account>`: fields left out keep their value. */
  updateAccount(account: string, update: AccountUpdate): Promise<AccountSettings>;
  /** `POST /sim/accounts/<account>/cards`: the account's cards before their first call; answers how many it has. */
  registerCards(account: string, iccids: readonly string[]): Promise<number>;
  /** `PUT /sim/accounts/<account>/push`: the account's changes pushed to `url`, signed with `secret`. */
  push(
    account: string,
    settings: { readonly url: string; readonly secret: string; readonly types?: readonly string[]; readonly batchMs?: number },
  ): Promise<void>;
  /** `POST /sim/cards/<iccid>/state`. */
  updateCard(iccid: string, update: CardStateUpdate): Promise<SimCardState>;
  /** `POST /sim/reset`: clears accounts, cards and counters. */
  reset(seed?: number): Promise<void>;
}

export function simulatorControl(url: string): SimulatorControl {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${url}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    if (res.status !== 200) throw new Error(`simulator ${method} ${path} answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as T;
  };
  return {
    url,
    stats: (options = {}) => call<SimStats>('GET', options.cards === false ? '/sim/stats?cards=0' : '/sim/stats'),
    updateAccount: (account, update) => call<AccountSettings>('PUT', `/sim/accounts/${encodeURIComponent(account)}`, update),
    registerCards: async (account, iccids) => (await call<{ cards: number }>('POST', `/sim/accounts/${encodeURIComponent(account)}/cards`, { iccids })).cards,
    push: async (account, settings) => void (await call<unknown>('PUT', `/sim/accounts/${encodeURIComponent(account)}/push`, settings)),
    updateCard: (iccid, update) => call<SimCardState>('POST', `/sim/cards/${encodeURIComponent(iccid)}/state`, update),
    reset: async (seed) => void (await call<unknown>('POST', '/sim/reset', seed === undefined ? {} : { seed })),
  };
}
