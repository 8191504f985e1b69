/**
 * bench:burst's disaggregated setting (burst-pd.ts), run as the bench runs it on a shorter window of the compressed
 * conversation trace: decode scale-outs by switching a prefill instance reach their first decode ≥ 3× sooner than
 * ones loading over the network (the same region, only controller.pdSwitch differs), and the interference-avoiding
 * multicast plan keeps the prefill node out of the sources.
 */
import { describe, expect, it } from "vitest";
import { defaultDataDir } from "../../core/paths.js";
import { rescale } from "../../sim/replay/loading.js";
import { readTrace } from "../../sim/replay/traces.js";
import { decodeScaleOuts, kvInterference } from "./burst-pd.js";
import { pdBurstChecks } from "./verdicts/burst.js";

describe("bench:burst disaggregated setting", () => {
  it("switching serves decodes sooner than loading; KV keeps its time beside the KV-aware multicast plan", async () => {
    const conv = rescale(readTrace("azure-conv", defaultDataDir()), 4);
    const withSwitch = await decodeScaleOuts(conv, true, 3 * 60_000);
    const withLoad = await decodeScaleOuts(conv, false, 3 * 60_000);
    expect(withSwitch.byKind.switch ?? 0).toBeGreaterThan(0);
    expect(withLoad.byKind.switch).toBeUndefined();
    expect(withSwitch.failed + withLoad.failed).toBe(0);
    const kv = kvInterference();
    expect(kv.avoiding.sources).toEqual(["d0"]);
    expect(kv.ignoring.sources).toContain("p0");
    expect(kv.ignoring.ratio).toBeGreaterThan(kv.avoiding.ratio);
    expect(pdBurstChecks(withSwitch, withLoad, kv.avoiding.ratio).map((c) => c.ok)).toEqual([true, true]);
  }, 120_000);
});
