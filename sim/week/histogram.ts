/**
 * Fixed-memory latency histograms for the replay: log-spaced buckets (ratio 1.01) from 1 ms to ~12 days, so a
 * percentile is exact to within 1% whatever the count (finer than the 5% the strategies bench compares p95s at),
 * plus one slot for requests that were never served: they count as infinitely late (an SLO miss in every
 * percentile, issue 11), so a strategy cannot look fast by turning requests away. `HistogramSeries` keeps one
 * histogram per time slot (per minute or per hour) in one typed array.
 */

const RATIO = 1.01;
const LOG_RATIO = Math.log(RATIO);
/** Latency buckets: 0 holds < 1 ms; bucket b ≥ 1 holds [RATIO^(b−1), RATIO^b) ms. */
export const BUCKETS = 1 + Math.ceil(Math.log(1e9) / LOG_RATIO);
/** The slot after the last latency bucket: requests never served (upper edge +Infinity). */
export const UNSERVED = BUCKETS;
/** Slots per histogram: the latency buckets and the unserved slot. */
export const SLOTS = BUCKETS + 1;

/** The bucket of a latency in ms (≥ 0). */
export function bucketOf(ms: number): number {
  if (!(ms >= 1)) return 0;
  return Math.min(BUCKETS - 1, 1 + Math.floor(Math.log(ms) / LOG_RATIO));
}

/** Upper edge of a slot in ms (the value a percentile reports): +Infinity for the unserved slot. */
export function bucketUpperMs(b: number): number {
  if (b >= UNSERVED) return Number.POSITIVE_INFINITY;
  return b === 0 ? 1 : Math.pow(RATIO, b);
}

/** The q-quantile (0 < q ≤ 1) of counts[offset .. offset + SLOTS); NaN when empty, +Infinity when it falls on unserved. */
export function quantileOf(counts: Uint32Array | Float64Array, q: number, offset = 0): number {
  let total = 0;
  for (let b = 0; b < SLOTS; b++) total += counts[offset + b]!;
  if (total === 0) return Number.NaN;
  const rank = Math.ceil(q * total);
  let acc = 0;
  for (let b = 0; b < SLOTS; b++) {
    acc += counts[offset + b]!;
    if (acc >= rank) return bucketUpperMs(b);
  }
  return bucketUpperMs(UNSERVED);
}

/** One histogram. `count` includes unserved requests; `sumMs` only served ones. */
export class Histogram {
  readonly counts = new Float64Array(SLOTS);
  count = 0;
  sumMs = 0;

  add(ms: number): void {
    this.counts[bucketOf(ms)]!++;
    this.count++;
    this.sumMs += ms;
  }

  /** A request that was never served (infinitely late). */
  addUnserved(): void {
    this.counts[UNSERVED]!++;
    this.count++;
  }

  get unserved(): number {
    return this.counts[UNSERVED]!;
  }

  quantile(q: number): number {
    return quantileOf(this.counts, q);
  }
}

/** A histogram per slot (e.g. per minute of the week). */
export class HistogramSeries {
  readonly counts: Uint32Array;

  constructor(readonly slots: number, readonly slotMs: number) {
    this.counts = new Uint32Array(slots * SLOTS);
  }

  add(atMs: number, ms: number): void {
    this.addTo(atMs, bucketOf(ms));
  }

  /** A request arriving at `atMs` that was never served. */
  addUnserved(atMs: number): void {
    this.addTo(atMs, UNSERVED);
  }

  private addTo(atMs: number, bucket: number): void {
    const s = Math.floor(atMs / this.slotMs);
    if (s < 0 || s >= this.slots) return;
    this.counts[s * SLOTS + bucket]!++;
  }

  quantile(slot: number, q: number): number {
    return quantileOf(this.counts, q, slot * SLOTS);
  }

  count(slot: number): number {
    let n = 0;
    for (let b = 0; b < SLOTS; b++) n += this.counts[slot * SLOTS + b]!;
    return n;
  }
}
