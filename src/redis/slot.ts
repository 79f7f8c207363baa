/**
 * Redis Cluster key slot (CRC16/XMODEM of the hash tag, mod 16384), used by tests to prove every
 * script touches one slot.
 */
const SLOT_COUNT = 16384;

function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

/** The part of a key Redis Cluster hashes: the first non-empty `{…}`, else the whole key. */
export function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

export function keySlot(key: string): number {
  return crc16(Buffer.from(hashTag(key), 'utf8')) % SLOT_COUNT;
}
