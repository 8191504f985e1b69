/**
 * Offline planning from the public data (core/data, what tidegate ships; ../shared/data, the full folder, for the formats it
 * does not ship): format detection, the conversions, `tidegate plan` on
 * the ServeGen aggregates straight from the folder (a forecast and a chart for every series, hours from the trace
 * start), `tidegate history import`, and `tidegate forecast backtest` on a short series (a message, no stack trace).
 * The CLI cases run the compiled CLI (dist/, `npx tsc -p tsconfig.json` first).
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../test/e2e/procs.js";
import { shippedDataDir } from "../core/paths.js";
import { SHARED_DATA, needingSharedData, sharedDataMissing } from "../test/helpers/shared-data.js";
import { detectFormat, importHistories, importHistory } from "./import.js";
import { parseHistoryCsv } from "./history-file.js";
import type { PlanReport } from "./report.js";

const DATA = shippedDataDir();
const AGG = join(DATA, "servegen", "aggregate");
const dir = mkdtempSync(join(tmpdir(), "tidegate-import-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cli = runCli;

const first = (f: string) => readFileSync(f, "utf8").split(/\r?\n/)[0]!;

describe("history import", () => {
  it("detects every shipped format from its first line", () => {
    expect(detectFormat(first(join(AGG, "language_m-large_total_rate_600s.csv")), "x")).toBe("servegen-aggregate");
    expect(detectFormat(first(join(DATA, "azure_llm_2023/AzureLLMInferenceTrace_code.csv")), "x")).toBe("azure-trace");
    expect(() => detectFormat("a,b,c", "f.csv")).toThrow(/f\.csv:1: unknown format/);
  });

  it.skipIf(sharedDataMissing !== undefined)(needingSharedData("detects the full data folder's per-client ServeGen and per-minute formats"), () => {
    expect(detectFormat(first(join(SHARED_DATA, "servegen/data/language/m-large/chunk-0-trace.csv")), "x")).toBe("servegen-client");
    expect(detectFormat(first(join(SHARED_DATA, "derived/mooncake_conversation_per_minute.csv")), "x")).toBe("per-minute");
  });

  it("converts ServeGen rates to tokens/s per minute, timed from the trace start", () => {
    const h = importHistory(join(AGG, "language_m-large_total_rate_600s.csv"));
    expect(h.series).toEqual([{ model: "m-large", region: "servegen" }]);
    expect(h.timeBase).toBe("relative");
    // Window 0: 212.78 req/s × (355.4 + 292.5) tokens, spread over minutes 0..9.
    const w0 = h.samples.filter((s) => s.minuteMs < 600_000);
    expect(w0).toHaveLength(10);
    expect(w0[0]!.tokensPerS).toBeCloseTo(212.78 * (355.4 + 292.5), 3);
  });

  it("reads the Azure trace per minute on its calendar", () => {
    const h = importHistory(join(DATA, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"), { model: "llama2-70b", region: "us-east" });
    expect(h.timeBase).toBe("calendar");
    expect(h.series).toEqual([{ model: "llama2-70b", region: "us-east" }]);
    expect(new Date(h.samples[0]!.minuteMs).toISOString()).toBe("2023-11-16T18:15:00.000Z");
    expect(h.samples.length).toBeGreaterThanOrEqual(58);
  });

  it("moves shorter ServeGen series by whole days to end with the longest, and refuses mixed time bases", async () => {
    const h = await importHistories([join(AGG, "language_m-small_total_rate_600s.csv"), join(AGG, "reason_deepseek-r1_total_rate_600s.csv")]);
    const end = (m: string) => Math.max(...h.samples.filter((s) => s.model === m).map((s) => s.minuteMs));
    expect(end("deepseek-r1")).toBe(end("m-small"));
    expect(h.descriptions[1]).toContain("moved 13 days later");
    await expect(importHistories([join(AGG, "reason_deepseek-r1_total_rate_600s.csv"), join(DATA, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv")])).rejects.toThrow(/cannot mix/);
  });
});

describe("tidegate plan on the shipped ServeGen files", () => {
  it("forecasts every series, with a chart each and times as hours from the trace start", async () => {
    const files = ["language_m-large", "language_m-mid", "language_m-small", "reason_deepseek-r1", "multimodal_mm-image"].map((f) => join(AGG, `${f}_total_rate_600s.csv`));
    const out = join(dir, "servegen");
    const r = await cli(["plan", "--history", files.join(","), "--out", out]);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("no --fleet: a stand-in fleet");
    const summary = JSON.parse(r.stdout) as { html: string; json: string; forecasts: number };
    expect(summary.forecasts).toBe(5);
    const report = JSON.parse(readFileSync(summary.json, "utf8")) as PlanReport;
    expect(report.timeBase).toBe("relative");
    for (const f of report.forecasts) {
      expect(f.peak.mean).toBeGreaterThan(0);
      expect(f.forecastSteps).toHaveLength(6);
      expect(f.historyWindows.filter(Number.isFinite).length).toBeGreaterThanOrEqual(144);
    }
    expect(new Set(report.forecasts.map((f) => f.model))).toEqual(new Set(["m-large", "m-mid", "m-small", "deepseek-r1", "mm-image"]));
    const html = readFileSync(summary.html, "utf8");
    expect(html.match(/<svg class="chart forecast"/g)).toHaveLength(5);
    expect(html).toContain("Plan for hour 336");
    expect(html).toContain("hours since trace start");
    expect(html).not.toContain("1970");
    expect(html).toContain("offline plan: not sent to any region");
  });

  it("plans a history CSV written by `tidegate history import`", async () => {
    const csv = join(dir, "hist.csv");
    const r = await cli(["history", "import", "--in", join(AGG, "language_m-mid_total_rate_600s.csv"), "--model", "llama2-70b", "--region", "us-east", "--out", csv]);
    expect(r.code).toBe(0);
    const h = parseHistoryCsv(readFileSync(csv, "utf8"), csv);
    expect(h.endMs).toBe(14 * 86_400_000);
    const fleet = join(dir, "fleet.json");
    writeFileSync(fleet, JSON.stringify({ gpus: { "h100-80gb": {} }, models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4 } } }, regions: [{ name: "us-east", capacity: { "h100-80gb": 4000 }, endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 100, maxInstances: 900 }] }] }));
    const p = await cli(["plan", "--history", csv, "--fleet", fleet, "--out", join(dir, "mid")]);
    expect(p.code).toBe(0);
    expect((JSON.parse(p.stdout) as { forecasts: number }).forecasts).toBe(1);
  });
});

describe("tidegate forecast backtest on a short series", () => {
  it("says how long the series must be, without a stack trace", async () => {
    const r = await cli(["forecast", "backtest", "--series", join(AGG, "reason_deepseek-r1_total_rate_600s.csv")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is too short for a backtest: it covers 24\.0 h \(144 rows of 10 min\); with --held-out-from-day 10 it must cover at least 241 h/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
