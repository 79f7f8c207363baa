/**
 * Typed errors of the carrier queue store; negative script codes are mapped here, in one place.
 */

/** Return codes shared by the scripts in `lua/` (see each script's header). */
export const SCRIPT_CODE = {
  ok: 1,
  /** Token lost its claim (acquireExec/renew/finish/release). */
  lost: 0,
  /** acquireExec: another executor already holds the token's exec right. */
  execBusy: -1,
  /** requestCheck: the card is in no lane (not polled). The same number as execBusy, another script. */
  notPolled: -1,
  /** A script rejected its arguments. */
  invalidArgument: -2,
} as const;

export class CarrierQueueError extends Error {
  constructor(
    message: string,
    readonly script: string,
  ) {
    super(message);
    this.name = 'CarrierQueueError';
  }
}

/** A script returned −2: the store built arguments the script does not accept. */
export class ScriptArgumentError extends CarrierQueueError {
  constructor(script: string) {
    super(`Lua script ${script} rejected its arguments`, script);
    this.name = 'ScriptArgumentError';
  }
}

/** A script answered something its header does not document. */
export class UnexpectedScriptReplyError extends CarrierQueueError {
  constructor(
    script: string,
    readonly reply: unknown,
  ) {
    super(`Lua script ${script} returned an unexpected reply: ${JSON.stringify(reply)}`, script);
    this.name = 'UnexpectedScriptReplyError';
  }
}

/** Caller input the store refuses before reaching Redis (e.g. a card id that breaks token parsing). */
export class InvalidStoreInputError extends CarrierQueueError {
  constructor(
    script: string,
    readonly field: string,
    reason: string,
  ) {
    super(`${script}: invalid ${field}: ${reason}`, script);
    this.name = 'InvalidStoreInputError';
  }
}

/** Maps an integer reply to a known code, throwing the typed error for negative error codes. */
export function expectCode<T extends number>(script: string, reply: unknown, allowed: readonly T[]): T {
  if (typeof reply !== 'number') throw new UnexpectedScriptReplyError(script, reply);
  if (reply === SCRIPT_CODE.invalidArgument) throw new ScriptArgumentError(script);
  const found = allowed.find((code) => code === reply);
  if (found === undefined) throw new UnexpectedScriptReplyError(script, reply);
  return found;
}
