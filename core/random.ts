/** Seeded randomness shared by every tier (workloads, synthetic fleets, trace assignment). */

/** A deterministic uniform generator on [0, 1). */
export type Random = () => number;

/** mulberry32: a small, fast, seedable PRNG returning numbers in [0, 1); same seed, same sequence everywhere. */
export function mulberry32(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
