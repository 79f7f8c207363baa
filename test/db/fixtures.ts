/** Shared fixtures for the PostgreSQL tests (not a test file itself). */
import type pg from 'pg';
import { createCarrier } from '../../src/db/carriers.js';
import type { Carrier } from '../../src/domain/carrier.js';
import type { LifecycleStore } from '../../src/lifecycle/queueStore.js';
import type { CarrierQueueStore, UpsertInput } from '../../src/redis/carrierQueueStore.js';

let counter = 0;

/** A valid 19-character ICCID unique within the process. */
export function iccid(n: number): string {
  return `8986${String(n).padStart(15, '0')}`;
}

export async function makeCarrier(pool: pg.Pool, name = `acct-${++counter}`): Promise<Carrier> {
  return createCarrier(pool, {
    name,
    gatewayAccount: `gw-${name}`,
    groups: [
      { name: 'status', qps: 50 },
      { name: 'data', qps: 20 },
    ],
    typeGroups: { card_status: 'status', carddata: 'data', realname: 'status' },
  });
}

/** A device row (devices come from outside: the API has no device creation); its id. */
export async function makeDevice(pool: pg.Pool, deviceNo: string): Promise<string> {
  const { rows } = await pool.query<{ id: string }>('INSERT INTO device (device_no) VALUES ($1) RETURNING id::text', [deviceNo]);
  return rows[0]!.id;
}

/** Counts statements sent by every pg client while fn runs (pool.query goes through Client#query). */
export async function countStatements<T>(pg_: typeof pg, fn: () => Promise<T>): Promise<{ result: T; statements: number }> {
  const proto = pg_.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let statements = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    statements += 1;
    return original.apply(this, args);
  };
  try {
    const result = await fn();
    return { result, statements };
  } finally {
    proto.query = original;
  }
}

/**
 * A LifecycleStore that passes every call to `store`, except `upsertMany`, which runs `around` (the
 * rebuild tests land lifecycle events between a rebuild's reads and its writes there).
 */
export function storeWithUpsertMany(
  store: CarrierQueueStore,
  around: (inputs: readonly UpsertInput[], write: () => Promise<void>) => Promise<void>,
): LifecycleStore {
  return {
    upsert: (input) => store.upsert(input),
    remove: (carrierId, cardId) => store.remove(carrierId, cardId),
    removeMany: (refs) => store.removeMany(refs),
    requestCheck: (input) => store.requestCheck(input),
    laneOf: (carrierId, cardId) => store.laneOf(carrierId, cardId),
    clockNow: () => store.clockNow(),
    upsertMany: async (inputs) => {
      let toWake: string[] = [];
      await around(inputs, async () => {
        toWake = await store.upsertMany(inputs);
      });
      return toWake;
    },
  };
}
