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

/** Mixes a 32-bit seed (splitmix32 finaliser). */
export function mix32(x: number): number {
  x = (x + 0x9e3779b9) | 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** mulberry32 over a mixed seed; `stream` derives independent sequences from one seed. */
export function seededRandom(seed: number, stream = 0): Random {
  return mulberry32(mix32(mix32(seed >>> 0) ^ Math.imul(stream + 1, 0x27d4eb2d)));
}
