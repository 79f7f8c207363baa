/** Card domain types. */
export const CARD_STATUSES = ['inventory', 'test', 'active', 'suspended', 'stopped', 'terminated'] as const;
export type CardStatus = (typeof CARD_STATUSES)[number];

export function isCardStatus(value: unknown): value is CardStatus {
  return typeof value === 'string' && (CARD_STATUSES as readonly string[]).includes(value);
}

export interface Card {
  readonly id: string;
  readonly iccid: string;
  readonly msisdn?: string;
  readonly carrierId: string;
  readonly status: CardStatus;
  readonly enablePolling: boolean;
  readonly deviceId?: string;
  readonly standalone: boolean;
}

/** A card plus whether it is in polling scope (own switch and, unless standalone, its device's). */
export interface ScopedCard extends Card {
  readonly polled: boolean;
}

export interface NewCard {
  readonly iccid: string;
  readonly msisdn?: string;
  readonly carrierId: string;
  readonly status?: CardStatus;
  readonly enablePolling?: boolean;
  readonly deviceId?: string;
  /** Defaults to true when no device is given, false when one is. */
  readonly standalone?: boolean;
}
