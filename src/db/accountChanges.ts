/**
 * Follows the carrier-account changes PostgreSQL announces (migration 000010: a trigger on
 * `carrier_account` notifies `card_poller_carrier_account` with the table's schema) on a dedicated
 * connection that LISTENs. The connection is opened again, with backoff, whenever it is lost; since
 * notifications sent meanwhile are lost with it, every re-established LISTEN counts as a change.
 */
import pg from 'pg';
import { ConnectionErrorLog, type ConnectionLogger } from '../runtime/connectionErrors.js';

export const ACCOUNT_CHANGES_CHANNEL = 'card_poller_carrier_account';

export interface AccountChangesOptions {
  readonly url: string;
  /** Only this schema's notifications count: other deployments and test stacks share the channel. */
  readonly schema: string;
  readonly applicationName?: string;
  /** Called for each notification of `schema`, and after each reconnect (`missed`). */
  readonly onChange: (reason: 'notified' | 'missed') => void;
  /** Where the connection's errors and recovery go: the process' logger. */
  readonly logger: ConnectionLogger;
  /** First reconnect delay; doubled per failed attempt up to `maxBackoffMs`. */
  readonly backoffMs?: number;
  readonly maxBackoffMs?: number;
}

export interface AccountChanges {
  /** Resolves once LISTEN is in place for the first time (tests wait for it; production need not). */
  readonly listening: Promise<void>;
  stop(): Promise<void>;
}

const DEFAULT_BACKOFF_MS = 250;
const DEFAULT_MAX_BACKOFF_MS = 30_000;

export function followAccountChanges(options: AccountChangesOptions): AccountChanges {
  const errors = new ConnectionErrorLog(`postgres(${options.applicationName ?? 'account-changes'})`, { logger: options.logger });
  let stopped = false;
  let client: pg.Client | undefined;
  let wake: (() => void) | undefined;
  let markListening: () => void = () => undefined;
  const listening = new Promise<void>((resolve) => (markListening = resolve));

  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  // Set once a LISTEN was in place: every later one follows a lost connection.
  let listenedBefore = false;

  /** One connection's life: false when it could not LISTEN, true once a listening one ended. */
  const session = async (): Promise<boolean> => {
    const current = new pg.Client({
      connectionString: options.url,
      application_name: options.applicationName ?? 'account-changes',
      // A connection that dies silently (a network partition) must end, or nothing is heard again.
      keepAlive: true,
    });
    client = current;
    const ended = new Promise<void>((resolve) => current.once('end', resolve));
    // Without a listener a server-side close would throw from the event emitter.
    current.on('error', (error) => errors.error(error));
    current.on('notification', (message) => {
      if (message.channel === ACCOUNT_CHANGES_CHANNEL && message.payload === options.schema) options.onChange('notified');
    });
    try {
      await current.connect();
      await current.query(`LISTEN ${ACCOUNT_CHANGES_CHANNEL}`);
    } catch (error) {
      if (!stopped) errors.error(error);
      await current.end().catch(() => undefined);
      return false;
    }
    errors.recovered();
    markListening();
    // Whatever changed while nobody listened was not announced to us.
    if (listenedBefore && !stopped) options.onChange('missed');
    listenedBefore = true;
    await ended;
    return true;
  };

  const run = async (): Promise<void> => {
    const firstBackoff = options.backoffMs ?? DEFAULT_BACKOFF_MS;
    let backoff = firstBackoff;
    while (!stopped) {
      const listened = await session().catch(() => false);
      if (stopped) break;
      // A connection that listened and was then lost is retried soon; failed attempts back off further each time.
      if (listened) backoff = firstBackoff;
      await pause(backoff);
      if (!listened) backoff = Math.min(backoff * 2, options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS);
    }
  };
  const done = run();

  return {
    listening,
    async stop() {
      stopped = true;
      wake?.();
      await client?.end().catch(() => undefined);
      await done;
    },
  };
}
