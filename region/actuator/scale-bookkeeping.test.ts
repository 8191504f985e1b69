import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import { ScaleFailures } from "./scale-failures.js";
import { ScaleOutTimes } from "./scale-out-times.js";

describe("ScaleOutTimes", () => {
  const models = new Map([["m", { model: "m", totalBytes: 1.25e9, blockCount: 16 }]]);

  it("expects the ideal one-link transfer (M/B) until a scale-out is measured, then the last measured, at least 1 ms", () => {
    const t = new ScaleOutTimes(models, { linkBytesPerS: 1.25e9 });
    expect(t.expected("m", "h100-80gb")).toBeCloseTo(1000, 6);
    expect(t.expected("other", "h100-80gb")).toBeUndefined();
    t.record("m", "h100-80gb", 4200);
    expect(t.expected("m", "h100-80gb")).toBe(4200);
    expect(t.expected("m", "a100-40gb")).toBeCloseTo(1000, 6); // per endpoint
    t.record("m", "h100-80gb", 0);
    expect(t.expected("m", "h100-80gb")).toBe(1);
  });
});

describe("ScaleFailures", () => {
  it("keeps the newest 50, oldest first, stamped with the clock, in the same array", () => {
    const clock = new VirtualClock();
    const f = new ScaleFailures({ clock, log: silentLogger });
    const entries = f.entries;
    for (let i = 0; i < 60; i++) {
      clock.advanceToSync(i * 10);
      (i % 2 === 0 ? f.report.bind(f) : f.fail.bind(f))({ model: `m${i}`, gpu: "-", message: `#${i}` });
    }
    expect(f.entries).toBe(entries);
    expect(entries).toHaveLength(50);
    expect(entries[0]).toEqual({ atMs: 100, model: "m10", gpu: "-", message: "#10" });
    expect(entries[49]!.atMs).toBe(590);
  });
});
