/**
 * Prometheus metrics. Each process owns one `Registry`; every label combination known at start is initialised to 0
 * (controller-runtime's initMetrics) so rates and alerts work from the first scrape.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

/** A fresh registry; `defaults` adds process metrics (CPU, memory, event-loop lag). */
export function createRegistry(defaults = true): Registry {
  const registry = new Registry();
  if (defaults) collectDefaultMetrics({ register: registry });
  return registry;
}

/** All combinations of the given label values, e.g. {model:[a,b], priority:["0","1"]} → 4 label sets. */
export function labelCombinations<K extends string>(values: Record<K, readonly string[]>): Record<K, string>[] {
  let out: Record<string, string>[] = [{}];
  for (const [key, vals] of Object.entries(values) as [string, readonly string[]][]) {
    out = out.flatMap((partial) => vals.map((v) => ({ ...partial, [key]: v })));
  }
  return out as Record<K, string>[];
}

/** Sets every combination of a counter or gauge to 0 (counters: inc by 0), so the series exist from the start. */
export function initLabels<K extends string>(metric: Counter<K> | Gauge<K>, values: Record<K, readonly string[]>): void {
  for (const labels of labelCombinations(values)) {
    if (metric instanceof Counter) metric.inc(labels as never, 0);
    else metric.set(labels as never, 0);
  }
}

/** One label set's cell of a prom-client histogram (its internal layout, prom-client 15). */
interface HistogramCell {
  labels: Record<string, string | number>;
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

/**
 * A histogram child for one label set whose `observe` is a bucket search and three additions. prom-client's own
 * child (`labels(...)`) validates and hashes the labels on every call, a cost per token on the router's relay. It
 * writes prom-client's cell for the label set (created at 0 when missing), so scrapes read it as usual; a
 * `reset()` of the histogram detaches a child made before it (make children per stream, not per process).
 * metrics.test.ts checks it against prom-client's `observe` on the same values.
 */
export function histogramChild<K extends string>(h: Histogram<K>, labels: Record<K, string>): { observe(value: number): void } {
  const internal = h as unknown as { hashMap: Record<string, HistogramCell>; upperBounds: number[] };
  const keys = Object.keys(labels) as K[];
  const find = () => Object.values(internal.hashMap).find((c) => keys.length === Object.keys(c.labels).length && keys.every((k) => String(c.labels[k]) === labels[k]));
  let cell = find();
  if (cell === undefined) {
    h.zero(labels as never);
    cell = find();
  }
  const bounds = internal.upperBounds;
  if (cell === undefined || !Array.isArray(bounds)) {
    // Not the layout this was written for: prom-client's own child, slower but right.
    const child = h.labels(labels as never);
    return { observe: (v) => child.observe(v) };
  }
  const c = cell;
  // The cells' bucket keys as strings, made once (a number key is converted to its string on every access).
  const bucketKeys = bounds.map(String);
  return {
    observe(v: number) {
      if (!Number.isFinite(v)) return;
      c.sum += v;
      c.count += 1;
      // prom-client keeps per-bucket (not cumulative) counts; a value above every bound is only in count (+Inf).
      for (let i = 0; i < bounds.length; i++) {
        if (v <= bounds[i]!) {
          (c.bucketValues as Record<string, number>)[bucketKeys[i]!]! += 1;
          return;
        }
      }
    },
  };
}
