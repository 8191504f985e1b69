/**
 * The compiled CLI (`node dist/bin/tidegate.js`, built by `npm test`): `plan` on good and bad inputs, `forecast
 * backtest`, and the `planner` process against Redis with unreachable regions.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON } from "../core/config.js";
import { shippedDataDir } from "../core/paths.js";
import { freePort, runCli, spawnTidegate, stopAll } from "../test/e2e/procs.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../test/helpers/redis.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-plan-cli-"));
let redis: TestRedis;
const prefix = testPrefix("planner-cli");

beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await stopAll();
  await cleanupPrefix(redis.url, prefix);
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

const cli = runCli;

/** 8 days, one minute per 10-minute window, for each (model, region); `skipDay` leaves a day out (a gap). */
function historyCsv(rows: [string, string, number][], opts: { skipDay?: number; bad?: string } = {}): string {
  const lines = ["minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s"];
  for (let w = 0; w < 8 * 144; w++) {
    if (opts.skipDay !== undefined && Math.floor(w / 144) === opts.skipDay) continue;
    for (const [model, region, base] of rows) lines.push(`${w * 600},${model},${region},${(base * (1 + 0.5 * Math.sin((2 * Math.PI * w) / 144))).toFixed(2)},${(base * 0.05).toFixed(2)}`);
  }
  if (opts.bad !== undefined) lines.splice(5, 0, opts.bad);
  return lines.join("\n") + "\n";
}

const FLEET = {
  alpha: 0.8,
  beta: 0.2,
  gpus: { "h100-80gb": { holdPerGpu: 5, vmStartPerGpu: 0.4 } },
  models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4, tokensPerS: 5000 } }, "llama3.1-8b": { "h100-80gb": { gpusPerInstance: 2 } } },
  regions: [
    { name: "east", capacity: { "h100-80gb": 48 }, endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 20 }, { model: "llama3.1-8b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 8 }] },
    { name: "west", capacity: { "h100-80gb": 16 }, endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 1, minInstances: 0, maxInstances: 20 }] },
  ],
};

function files(name: string, history: string, fleet: unknown = FLEET): { h: string; f: string; out: string } {
  const h = join(dir, `${name}.csv`);
  const f = join(dir, `${name}.json`);
  writeFileSync(h, history);
  writeFileSync(f, JSON.stringify(fleet));
  return { h, f, out: join(dir, `${name}-out`) };
}

describe("tidegate plan", () => {
  it("writes JSON and HTML reports; a gap is filled and reported", async () => {
    const p = files("ok", historyCsv([["llama2-70b", "east", 20000], ["llama2-70b", "west", 8000], ["llama3.1-8b", "east", 30000]], { skipDay: 3 }));
    const r = await cli(["plan", "--history", p.h, "--fleet", p.f, "--out", p.out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/solved by/);
    const summary = JSON.parse(r.stdout) as { id: string; json: string; html: string; status: string };
    expect(summary.status).toBe("optimal");
    const report = JSON.parse(readFileSync(summary.json, "utf8")) as { forecasts: unknown[]; warnings: string[]; actions: { target: number }[]; unmet: unknown[] };
    expect(report.forecasts).toHaveLength(3);
    expect(report.warnings.some((w) => /window\(s\) without data were filled/.test(w))).toBe(true);
    expect(report.unmet).toEqual([]);
    expect(readFileSync(summary.html, "utf8")).toMatch(/<svg class="chart forecast"/);
    expect(readdirSync(p.out).sort()).toEqual([`${summary.id}.html`, `${summary.id}.json`]);
  });

  it("rejects NaN and negative values naming the line", async () => {
    const nan = files("nan", historyCsv([["llama2-70b", "east", 100]], { bad: "600,llama2-70b,east,NaN,0" }));
    const r1 = await cli(["plan", "--history", nan.h, "--fleet", nan.f, "--out", nan.out]);
    expect(r1.code).toBe(2);
    expect(r1.stderr).toMatch(/nan\.csv:6: iw_tokens_per_s "NaN" is not a finite number/);
    const neg = files("neg", historyCsv([["llama2-70b", "east", 100]], { bad: "600,llama2-70b,east,5,-1" }));
    const r2 = await cli(["plan", "--history", neg.h, "--fleet", neg.f, "--out", neg.out]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/neg\.csv:6: niw_tokens_per_s -1 is negative/);
  });

  it("reports a model with no capacity and an infeasible plan instead of failing", async () => {
    const fleet = structuredClone(FLEET) as typeof FLEET & { models: Record<string, unknown> };
    fleet.regions[1]!.endpoints[0]!.minInstances = 6; // 6 × 4 GPUs > 16 in west: minimums exceed capacity
    const p = files("unmet", historyCsv([["llama2-70b", "east", 400000], ["bloom-176b", "east", 1000]]), fleet);
    const r = await cli(["plan", "--history", p.h, "--fleet", p.f, "--out", p.out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/could not meet global bloom-176b: .*no endpoint \(no capacity\) anywhere/);
    expect(r.stderr).toMatch(/could not meet capacity west@h100-80gb/);
    expect(r.stderr).toMatch(/could not meet cover llama2-70b@east/);
    const summary = JSON.parse(r.stdout) as { status: string; unmet: number };
    expect(summary.status).toMatch(/infeasible/);
    expect(summary.unmet).toBeGreaterThanOrEqual(3);
  });

  it("rejects a fleet without tps for a model the performance model does not know", async () => {
    const fleet = structuredClone(FLEET) as { models: Record<string, unknown> };
    fleet.models["mystery"] = { "h100-80gb": { gpusPerInstance: 2 } };
    const p = files("badfleet", historyCsv([["llama2-70b", "east", 100]]), fleet);
    const r = await cli(["plan", "--history", p.h, "--fleet", p.f, "--out", p.out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/models\.mystery\.h100-80gb\.tokensPerS: is required: no performance profile/);
  });

  it("has helpful --help", async () => {
    const r = await cli(["plan", "--help"]);
    expect(r.stdout).toMatch(/--history <string>/);
    expect(r.stdout).toMatch(/minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s/);
  });
});

describe("tidegate forecast backtest", () => {
  it("prints MAPE per method with progress on stderr (m-small has zero windows; ARIMA runs in workers from dist/)", async () => {
    const r = await cli(["forecast", "backtest", "--series", join(shippedDataDir(), "servegen/aggregate/language_m-small_total_rate_600s.csv"), "--methods", "blend,seasonal-naive,persistence,arima"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/blend 96\/96 hours/);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { method: string; mapePct: number; invalid: number });
    expect(lines.map((l) => l.method)).toEqual(["blend", "seasonal-naive", "persistence", "arima"]);
    for (const l of lines) {
      expect(Number.isFinite(l.mapePct)).toBe(true);
      expect(l.invalid).toBe(0);
    }
  });
});

describe("tidegate planner", () => {
  it("leads, plans, tries to send targets, and serves /plans behind the admin key", async () => {
    const base = DEFAULT_CONFIG_JSON as { regions: { grpcAddress: string }[] };
    const regions = await Promise.all(base.regions.map(async (r) => ({ ...r, grpcAddress: `127.0.0.1:${await freePort()}` })));
    const cfg = join(dir, "planner-config.json");
    writeFileSync(cfg, JSON.stringify({ ...(DEFAULT_CONFIG_JSON as object), regions, router: { adminKeys: ["admin-key-123"] } }));
    const p = await spawnTidegate("planner", ["planner", "--config", cfg, "--redis-url", redis.url, "--key-prefix", prefix, "--interval-ms", "60000", "--port", "0"], /\/plans on http:\/\/127\.0\.0\.1:(\d+)/);
    const url = `http://127.0.0.1:${p.match[1]}/plans`;
    let list: { data: { id: string; decisionId: number }[] } = { data: [] };
    for (let i = 0; i < 100 && list.data.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 200));
      list = (await (await fetch(url, { headers: { authorization: "Bearer admin-key-123", accept: "application/json" } })).json()) as typeof list;
    }
    expect(list.data[0]?.decisionId, p.output()).toBe(1);
    const report = (await (await fetch(`${url}/${list.data[0]!.id}.json`, { headers: { authorization: "Bearer admin-key-123" } })).json()) as { acks: { accepted: boolean; error?: string }[]; warnings: string[] };
    expect(report.acks).toHaveLength(3);
    expect(report.acks.every((a) => !a.accepted && typeof a.error === "string")).toBe(true);
    expect(report.warnings.some((w) => /no interactive history/.test(w))).toBe(true);
    expect((await fetch(url)).status).toBe(401);
    expect(await p.stop()).toBe(0);
  });
});
