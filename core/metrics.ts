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
