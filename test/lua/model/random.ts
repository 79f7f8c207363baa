import { createPrng } from '../../../src/simulator/random.js';

/** The simulator's seeded PRNG, so a failing interleaving can be replayed from its seed. */
export class Random {
  readonly next: () => number;

  constructor(seed: number) {
    this.next = createPrng(seed);
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.next() * items.length)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  subset<T>(items: readonly T[]): T[] {
    return items.filter(() => this.chance(0.5));
  }
}
