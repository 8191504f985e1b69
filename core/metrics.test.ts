import { describe, expect, it } from "vitest";
import { Histogram, Registry, histogramChild } from "./metrics.js";

describe("histogramChild", () => {
  const make = (name: string, registry: Registry) => new Histogram({ name, help: "h", labelNames: ["model", "region"] as const, buckets: [0.001, 0.01, 0.1, 1], registers: [registry] });
  const values = [0.0005, 0.001, 0.002, 0.05, 0.1, 0.5, 2, 30, 0];

  it("records what prom-client's observe records, in the series a scrape reads", async () => {
    const registry = new Registry();
    const slow = make("slow_seconds", registry);
    const fast = make("fast_seconds", registry);
    const labels = { model: "m", region: "r" };
    const child = histogramChild(fast, labels);
    for (const v of values) {
      slow.observe(labels, v);
      child.observe(v);
    }
    const text = await registry.metrics();
    const series = (name: string) =>
      text
        .split("\n")
        .filter((l) => l.startsWith(name))
        .map((l) => l.slice(name.length));
    expect(series("fast_seconds").length).toBeGreaterThan(0);
    expect(series("fast_seconds")).toEqual(series("slow_seconds"));
    expect(text).toMatch(/^fast_seconds_count\{model="m",region="r"\} 9$/m);
    expect(text).toMatch(/^fast_seconds_bucket\{le="0\.01",model="m",region="r"\} 4$/m);
  });

  it("adds to a label set that already has samples, and leaves other label sets alone", async () => {
    const registry = new Registry();
    const h = make("h_seconds", registry);
    h.observe({ model: "m", region: "r" }, 0.05);
    h.observe({ model: "m", region: "other" }, 0.05);
    histogramChild(h, { model: "m", region: "r" }).observe(0.5);
    const text = await registry.metrics();
    expect(text).toMatch(/^h_seconds_count\{model="m",region="r"\} 2$/m);
    expect(text).toMatch(/^h_seconds_sum\{model="m",region="r"\} 0\.55$/m);
    expect(text).toMatch(/^h_seconds_count\{model="m",region="other"\} 1$/m);
  });

  it("skips a value that is not finite (prom-client would throw on the relay)", async () => {
    const registry = new Registry();
    const h = make("n_seconds", registry);
    const child = histogramChild(h, { model: "m", region: "r" });
    child.observe(Number.NaN);
    child.observe(0.002);
    expect(await registry.metrics()).toMatch(/^n_seconds_count\{model="m",region="r"\} 1$/m);
  });
});
