/**
 * bench:burst's disaggregated setting (burst-pd.ts), run as the bench runs it: a decode scale-out by switching a
 * prefill instance reaches its first decode ≥ 3× sooner than one loading over the network (the same region, only
 * controller.pdSwitch differs), and the interference-avoiding multicast plan keeps the prefill node out of the sources.
 */
import { describe, expect, it } from "vitest";
import { decodeScaleOut, kvInterference } from "./burst-pd.js";
import { pdBurstChecks } from "./verdicts/burst.js";

describe("bench:burst disaggregated setting", () => {
  it("switching serves decodes sooner than loading; KV keeps its time beside the KV-aware multicast plan", async () => {
    const withSwitch = await decodeScaleOut(true);
    const withLoad = await decodeScaleOut(false);
    expect(withSwitch.kind).toBe("switch");
    expect(["provision", "reclaim", "redeploy"]).toContain(withLoad.kind);
    const kv = kvInterference();
    expect(kv.avoiding.sources).toEqual(["d0"]);
    expect(kv.ignoring.sources).toContain("p0");
    expect(kv.ignoring.ratio).toBeGreaterThan(kv.avoiding.ratio);
    expect(pdBurstChecks(withSwitch, withLoad, kv.avoiding.ratio).map((c) => c.ok)).toEqual([true, true]);
  }, 60_000);
});
