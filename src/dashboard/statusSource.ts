/** The sampler's view of the accounts: the same status `GET /v1/carriers/:id/status` answers. */
import { listCarriers } from '../db/carriers.js';
import type { ApiContext } from '../api/context.js';
import { carrierStatus, type CarrierStatus } from '../api/queries/carrierStatus.js';
import type { StatusSample } from './history.js';
import type { StatusSource } from './sampler.js';

export function sampleOf(status: CarrierStatus, t: number): StatusSample {
  const groups = status.groups.map((group) => ({
    name: group.name,
    used: group.usedLastSecond,
    effective: group.qpsEffective,
    configured: group.qpsConfigured,
  }));
  return {
    t,
    callsPerSec: groups.reduce((sum, group) => sum + group.used, 0),
    groups,
    latenessP50: status.latenessMs.p50,
    latenessP99: status.latenessMs.p99,
    inflight: status.inflight,
    priority: status.lanes.priority,
    normal: status.lanes.normal,
    dueNow: status.dueNow,
    stretchFactor: status.capacity.stretchFactor,
  };
}

export function apiStatusSource(ctx: ApiContext): StatusSource {
  return {
    async carrierIds() {
      return (await listCarriers(ctx.deps.pool)).map((carrier) => carrier.id);
    },
    async sample(carrierId, now) {
      return sampleOf(await carrierStatus(ctx, carrierId), now);
    },
  };
}
