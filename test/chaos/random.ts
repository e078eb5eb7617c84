import { randomInt } from 'node:crypto';

/**
 * A seeded pseudo-random stream (mulberry32): every random choice of a chaos run draws from one of these, so
 * a seed replays the same choices, as far as the timing of processes lets it.
 */
export class Random {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** A float in [min, max). */
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One key, drawn with the probability of its weight among all the weights. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as Array<[K, number]>;
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let roll = this.next() * total;
    for (const [key, weight] of entries) {
      roll -= weight;
      if (roll < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /**
   * An independent stream for one actor (a client, the worker killer), derived from the seed and a label,
   * not from this stream's position: how the actors' draws interleave depends on timing, and must not
   * change what each actor draws.
   */
  fork(label: string): Random {
    // FNV-1a over the label, mixed with the seed.
    let hash = 0x811c9dc5 ^ this.seed;
    for (let i = 0; i < label.length; i++) hash = Math.imul(hash ^ label.charCodeAt(i), 0x01000193);
    return new Random(hash >>> 0);
  }
}

/** A seed for a run that names none; it is printed, so the run can be repeated. */
export function freshSeed(): number {
  return randomInt(1, 2 ** 31 - 1);
}
