/** Append-only audit records, written with the change they describe (same transaction). */
import type { Queryable } from './queryable.js';

export type AuditEntity = 'polling_priority_item' | 'system_config' | 'carrier_account' | 'iot_card' | 'polling_config';

export interface AuditInput {
  readonly entityType: AuditEntity;
  readonly entityId: string;
  readonly action: string;
  readonly actor: string;
  readonly source: string;
  readonly reason?: string;
  readonly before: unknown;
  readonly after: unknown;
  readonly occurredAt?: Date;
}

export async function writeAudit(db: Queryable, input: AuditInput): Promise<void> {
  await db.query(
    `INSERT INTO audit_log (entity_type, entity_id, action, actor, source, reason, before, after, occurred_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, coalesce($9, now()))`,
    [
      input.entityType,
      input.entityId,
      input.action,
      input.actor,
      input.source,
      input.reason ?? null,
      input.before === null || input.before === undefined ? null : JSON.stringify(input.before),
      input.after === null || input.after === undefined ? null : JSON.stringify(input.after),
      input.occurredAt ?? null,
    ],
  );
}
