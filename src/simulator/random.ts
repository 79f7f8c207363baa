/**
 * Seeded randomness for the simulator: the same seed and the same call order give the same
 * latencies, errors and card states.
 */

/** mulberry32: tiny, fast, good enough for simulation (not for cryptography). */
export function createPrng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a of a string mixed with a seed: per-card PRNGs independent of call order. */
export function hashSeed(seed: number, text: string): number {
  let hash = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** z-score of the 99th percentile of the standard normal distribution. */
const Z99 = 2.3263478740408408;

/**
 * Log-normal sample with the given median (p50) and 99th percentile: the usual shape of network
 * latency (a floor, a long right tail).
 */
export function logNormal(random: () => number, p50: number, p99: number): number {
  if (p50 <= 0) return 0;
  if (p99 <= p50) return p50;
  const sigma = Math.log(p99 / p50) / Z99;
  // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  const u = 1 - random();
  const v = random();
  const normal = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  return p50 * Math.exp(sigma * normal);
}
