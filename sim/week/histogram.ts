/**
 * Fixed-memory latency histograms for the replay: log-spaced buckets (ratio 1.01) from 1 ms to ~12 days, so a
 * percentile is exact to within 1% whatever the count (finer than the 5% the strategies bench compares p95s at). `HistogramSeries` keeps one histogram per time slot (per
 * minute or per hour) in one typed array.
 */

const RATIO = 1.01;
const LOG_RATIO = Math.log(RATIO);
/** Buckets: 0 holds < 1 ms; bucket b ≥ 1 holds [RATIO^(b−1), RATIO^b) ms. */
export const BUCKETS = 1 + Math.ceil(Math.log(1e9) / LOG_RATIO);

/** The bucket of a latency in ms (≥ 0). */
export function bucketOf(ms: number): number {
  if (!(ms >= 1)) return 0;
  return Math.min(BUCKETS - 1, 1 + Math.floor(Math.log(ms) / LOG_RATIO));
}

/** Upper edge of a bucket in ms (the value a percentile reports). */
export function bucketUpperMs(b: number): number {
  return b === 0 ? 1 : Math.pow(RATIO, b);
}

/** The q-quantile (0 < q ≤ 1) of counts[offset .. offset + BUCKETS); NaN when empty. */
export function quantileOf(counts: Uint32Array | Float64Array, q: number, offset = 0): number {
  let total = 0;
  for (let b = 0; b < BUCKETS; b++) total += counts[offset + b]!;
  if (total === 0) return Number.NaN;
  const rank = Math.ceil(q * total);
  let acc = 0;
  for (let b = 0; b < BUCKETS; b++) {
    acc += counts[offset + b]!;
    if (acc >= rank) return bucketUpperMs(b);
  }
  return bucketUpperMs(BUCKETS - 1);
}

/** One histogram. */
export class Histogram {
  readonly counts = new Float64Array(BUCKETS);
  count = 0;
  sumMs = 0;

  add(ms: number): void {
    this.counts[bucketOf(ms)]!++;
    this.count++;
    this.sumMs += ms;
  }

  quantile(q: number): number {
    return quantileOf(this.counts, q);
  }
}

/** A histogram per slot (e.g. per minute of the week). */
export class HistogramSeries {
  readonly counts: Uint32Array;

  constructor(readonly slots: number, readonly slotMs: number) {
    this.counts = new Uint32Array(slots * BUCKETS);
  }

  add(atMs: number, ms: number): void {
    const s = Math.floor(atMs / this.slotMs);
    if (s < 0 || s >= this.slots) return;
    this.counts[s * BUCKETS + bucketOf(ms)]!++;
  }

  quantile(slot: number, q: number): number {
    return quantileOf(this.counts, q, slot * BUCKETS);
  }

  count(slot: number): number {
    let n = 0;
    for (let b = 0; b < BUCKETS; b++) n += this.counts[slot * BUCKETS + b]!;
    return n;
  }
}
