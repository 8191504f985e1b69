import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig, DEFAULT_CONFIG_JSON } from "../../core/config.js";
import { ValidationError } from "../../core/validate.js";
import { WorkloadStream, type Arrival } from "./generator.js";
import { parseClientCsv } from "./servegen.js";
import { DEFAULT_WORKLOAD_JSON, parseWorkload } from "./spec.js";

const fleet = parseConfig(DEFAULT_CONFIG_JSON);
const dir = mkdtempSync(join(tmpdir(), "tidegate-wl-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A synthetic ServeGen source: `clients` clients, 14 days of windows, rate per window from `rate(w)`. */
function source(name: string, clients: number, rate: (w: number) => number, dist = "Gamma", shape = 0.25): string {
  const d = join(dir, "sg", name);
  mkdirSync(d, { recursive: true });
  for (let c = 0; c < clients; c++) {
    const rows = Array.from({ length: 2016 }, (_, w) => `${w * 600},${rate(w)},2,${dist},${shape},1`);
    writeFileSync(join(d, `chunk-${c}-trace.csv`), rows.join("\n") + "\n");
  }
  return name;
}
mkdirSync(join(dir, "az"), { recursive: true });
const azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + Array.from({ length: 100 }, (_, i) => `2023-11-16 18:17:03.9799600,${100 + i},${10 + i}`).join("\n") + "\n";
writeFileSync(join(dir, "az", "AzureLLMInferenceTrace_conv.csv"), azure);
writeFileSync(join(dir, "az", "AzureLLMInferenceTrace_code.csv"), azure.replace(/\n/g, "\r\n"));

function spec(over: Record<string, unknown> = {}) {
  return parseWorkload({
    ...DEFAULT_WORKLOAD_JSON,
    servegenDir: join(dir, "sg"),
    azureDir: join(dir, "az"),
    days: 0.5,
    targetRequests: 20_000,
    models: [{ name: "llama2-70b", source: source("flat", 4, () => 1), share: 1, tokens: "conv" }],
    niwTokenShare: 0,
    ...over,
  }, fleet);
}

function drain(s: WorkloadStream, max = Infinity): Arrival[] {
  const out: Arrival[] = [];
  for (let a = s.next(); a !== undefined && out.length < max; a = s.next()) out.push(a);
  return out;
}

describe("WorkloadStream", () => {
  it("is seeded and reproducible, and the seed matters", () => {
    const a = drain(new WorkloadStream(spec()), 2000);
    const b = drain(new WorkloadStream(spec()), 2000);
    const c = drain(new WorkloadStream(spec({ seed: 7 })), 2000);
    expect(a).toEqual(b);
    expect(c.map((x) => x.atMs)).not.toEqual(a.map((x) => x.atMs));
    for (let i = 1; i < a.length; i++) expect(a[i]!.atMs).toBeGreaterThanOrEqual(a[i - 1]!.atMs);
  });

  it("scales client rates to the target and keeps each window's inter-arrival CV (Gamma shape 0.25 → CV 2)", () => {
    const s = new WorkloadStream(spec({ regions: [{ name: "us-east", clientShare: 1, utcOffsetH: -5 }] }));
    const all = drain(s);
    expect(all.length).toBeGreaterThan(20_000 * 0.85);
    expect(all.length).toBeLessThan(20_000 * 1.15);
    // One client's gaps: CV of a Gamma(k) renewal process is 1/√k = 2.
    const perClient = new Map<number, number[]>();
    const stream2 = new WorkloadStream(spec({ regions: [{ name: "us-east", clientShare: 1, utcOffsetH: -5 }], models: [{ name: "llama2-70b", source: source("one", 1, () => 1), share: 1, tokens: "conv" }] }));
    const times = drain(stream2).map((x) => x.atMs);
    perClient.set(0, times);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    const mean = gaps.reduce((x, y) => x + y, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((x, y) => x + (y - mean) ** 2, 0) / gaps.length);
    expect(sd / mean).toBeGreaterThan(1.6);
    expect(sd / mean).toBeLessThan(2.4);
  });

  it("reads each client's series in its region's local time", () => {
    // Rate 1 during local hours 9–17 only; us-west (UTC−8) clients peak 3 h after us-east (UTC−5) ones.
    const daytime = source("day", 6, (w) => ((w % 144) >= 54 && (w % 144) < 102 ? 1 : 0));
    const peakHour = (region: string, utcOffsetH: number) => {
      const arr = drain(new WorkloadStream(spec({ days: 1, regions: [{ name: region, clientShare: 1, utcOffsetH }], models: [{ name: "llama2-70b", source: daytime, share: 1, tokens: "conv" }] })));
      // Virtual 0 h is UTC midnight: us-west's local 16:00 of the day before, still inside its daytime window.
      const first = arr.find((a) => a.atMs >= 2 * 3_600_000)!.atMs / 3_600_000;
      return Math.floor(first);
    };
    expect(peakHour("us-east", -5)).toBe(14);
    expect(peakHour("us-west", -8)).toBe(17);
  });

  it("adds batch requests at the configured token share with deadlines, and injects bursts", () => {
    const s = new WorkloadStream(spec({ niwTokenShare: 0.2, niwDeadlineMs: 3_600_000 }));
    const all = drain(s);
    const niw = all.filter((a) => a.niw);
    expect(niw.length / all.length).toBeGreaterThan(0.15);
    expect(niw.length / all.length).toBeLessThan(0.25);
    expect(niw.every((a) => a.deadlineMs === a.atMs + 3_600_000)).toBe(true);
    const burst = drain(new WorkloadStream(spec({ bursts: [{ startMs: 3_600_000, durationMs: 1_200_000, factor: 8 }] })));
    const inWin = (xs: Arrival[]) => xs.filter((a) => a.atMs >= 3_600_000 && a.atMs < 4_800_000).length;
    expect(inWin(burst) / Math.max(1, inWin(all.filter((a) => !a.niw)))).toBeGreaterThan(5);
  });

  it("draws token lengths from the Azure rows", () => {
    const all = drain(new WorkloadStream(spec()), 500);
    for (const a of all) {
      expect(a.outputTokens).toBe(a.promptTokens - 90);
    }
  });
});

describe("bad workload input names the field", () => {
  it("rejects a model that no fleet region hosts, an unknown region, a zero share and a malformed CSV line", () => {
    const noRegion = parseConfig({ ...(DEFAULT_CONFIG_JSON as object), models: [{ name: "llama2-70b", gpusPerInstance: { "h100-80gb": 4 } }], regions: [{ name: "us-east", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama2-70b", gpu: "h100-80gb" }] }] });
    expect(() => parseWorkload({ ...DEFAULT_WORKLOAD_JSON, regions: [{ name: "us-east", clientShare: 1, utcOffsetH: -5 }], models: [{ name: "bloom-176b", source: "x", share: 1 }] }, noRegion)).toThrow(/models\[0\]\.name: model "bloom-176b" has no region/);
    expect(() => parseWorkload({ ...DEFAULT_WORKLOAD_JSON, regions: [{ name: "eu-north", clientShare: 1, utcOffsetH: 1 }] }, fleet)).toThrow(/regions\[0\]\.name/);
    expect(() => parseWorkload({ ...DEFAULT_WORKLOAD_JSON, models: [{ name: "llama2-70b", source: "x", share: 0 }] }, fleet)).toThrow(/models\[0\]\.share: must be > 0/);
    expect(() => parseWorkload({ ...DEFAULT_WORKLOAD_JSON, days: 14 }, fleet)).toThrow(ValidationError);
    expect(() => parseClientCsv("c/chunk-1", "0,1,2,Gamma,0.5,1\n600,-1,2,,0,0\n")).toThrow(/chunk-1 line 2: rate_rps must be a finite number ≥ 0/);
    expect(() => parseClientCsv("c/chunk-1", "0,1,2,Lognormal,0.5,1\n")).toThrow(/arrival_dist/);
  });
});
