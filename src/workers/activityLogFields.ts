/**
 * Binds the card, account and claim token of an activity's input to every line it logs through
 * the activity context logger (`log` from @temporalio/activity), next to the SDK's own workflowId,
 * activityType and attempt: one card's story can be followed across processes by grepping its id.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

const BOUND_FIELDS = ['cardId', 'carrierId', 'token'] as const;

/** The bound fields found on an activity's first argument (our activities take one input object). */
export function activityLogFields(args: readonly unknown[]): Record<string, string> {
  const input = args[0];
  const fields: Record<string, string> = {};
  if (typeof input !== 'object' || input === null) return fields;
  for (const name of BOUND_FIELDS) {
    const value = (input as Record<string, unknown>)[name];
    if (typeof value === 'string' || typeof value === 'number') fields[name] = String(value);
  }
  return fields;
}

export const bindActivityLogFields: ActivityInterceptorsFactory = () => {
  let fields: Record<string, string> = {};
  return {
    inbound: {
      execute(input, next) {
        fields = activityLogFields(input.args);
        return next(input);
      },
    },
    outbound: {
      getLogAttributes(attributes, next) {
        return next({ ...fields, ...attributes });
      },
    },
  };
};
