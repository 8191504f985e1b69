/**
 * bench:overload's `tidegate dev` arm (issue 49, "What it must show"): the bench's fleet — two regions of two
 * llama3.2-3b instances, max_num_seqs MAX_BATCH, the same engine time scale — as one `tidegate dev` process (static
 * actuator: in-process simulated engines; the router, the regions, the planner and the batch tier beside them), fed
 * by the bench's load generator from outside: warm-up at capacity's request rate, 0.3 × it (the unloaded TTFT,
 * printed), then `overloadX` × capacity from tenants a and b alike. Figures for verdicts/overload.ts
 * `devOverloadChecks`: 429 latency p99, admitted TTFT p99 against dev's TTFT SLO (`slo.ttftMs`, its default), and the
 * streams cut after their 200.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { DEFAULT_SLO } from "../../core/config.js";
import { spawnTidegate } from "../e2e/procs.js";
import { quantile } from "./sse-load.js";
import { KEYS, MAX_BATCH, MAX_TOKENS, MODEL, cpuSeconds, mean, openLoop, type Tenant } from "./overload-load.js";
import type { DevOverloadFigures } from "./verdicts/overload.js";

export interface DevArmOptions {
  /** A folder for dev's config, data and log. */
  dir: string;
  regions: readonly string[];
  enginesPerRegion: number;
  timeScale: number;
  /** The fleet's capacity in requests/s (bench phase 1: its engines fed directly). */
  capacityRequestsPerS: number;
  /** JSON merged into dev's `router` (BENCH_OVERLOAD_CONFIG). */
  routerExtra: object;
  warmupS: number;
  unloadedS: number;
  overloadS: number;
  overloadX: number;
}

/** Runs the arm (dev is stopped by the caller's stopAll); prints its lines; resolves with its figures. */
export async function runDevArm(o: DevArmOptions): Promise<DevOverloadFigures> {
  const file = join(o.dir, "dev.json");
  writeFileSync(
    file,
    JSON.stringify({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: o.regions.map((name) => ({ name, proximity: o.regions.filter((x) => x !== name), gpus: [{ type: "h100-80gb", count: 2 * o.enginesPerRegion }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: o.enginesPerRegion }] })),
      router: { port: 0, apiKeys: [{ key: KEYS.a, tenant: "a" }, { key: KEYS.b, tenant: "b" }], ...o.routerExtra },
      queue: { backend: "embedded", dataDir: join(o.dir, "dev-data") },
      controller: { actuator: "static" },
      engines: { kind: "sim", timeScale: o.timeScale, models: { [MODEL]: { maxBatch: MAX_BATCH } } },
    }),
  );
  const sloTtftMs = DEFAULT_SLO.ttftMs;
  const dev = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "warn", "--log-file", join(o.dir, "dev.log")], /tidegate dev: serving (http:\/\/127\.0\.0\.1:\d+)/, 120_000);
  const base = dev.match[1]!;
  const both = (i: number): Tenant => (i % 2 === 0 ? "a" : "b");
  await openLoop(base, "dev-warmup", o.capacityRequestsPerS, o.warmupS, both, 11);
  const unloaded = (await openLoop(base, "dev-unloaded", 0.3 * o.capacityRequestsPerS, o.unloadedS, both, 12)).filter((s) => s.status === 200);
  const unloadedTtft = unloaded.map((s) => s.ttftMs);
  console.log(`dev (one process: router, ${o.regions.length} regions of ${o.enginesPerRegion} in-process engines, planner, batch): unloaded (${unloaded.length} requests at 0.3 × capacity) TTFT mean ${mean(unloadedTtft).toFixed(1)} ms, p99 ${quantile(unloadedTtft, 0.99).toFixed(1)} ms; TTFT SLO ${sloTtftMs} ms`);
  const pid = dev.child.pid!;
  const cpu0 = cpuSeconds(pid);
  const load0 = loadavg()[0]!;
  const t0 = Date.now();
  const overload = await openLoop(base, "dev-overload", o.overloadX * o.capacityRequestsPerS, o.overloadS, both, 13);
  const cores = (cpuSeconds(pid) - cpu0) / ((Date.now() - t0) / 1000);
  const admitted = overload.filter((s) => s.status === 200);
  const shed = overload.filter((s) => s.status === 429);
  const other = overload.filter((s) => s.status !== 200 && s.status !== 429);
  const cut = admitted.filter((s) => !s.done);
  const admittedTtft = admitted.map((s) => (Number.isNaN(s.ttftMs) ? Number.POSITIVE_INFINITY : s.ttftMs));
  const figures: DevOverloadFigures = {
    shedP99Ms: shed.length === 0 ? Number.NaN : quantile(shed.map((s) => s.ttftMs), 0.99),
    shed: shed.length,
    admittedTtftP99Ms: admitted.length === 0 ? Number.NaN : quantile(admittedTtft, 0.99),
    admitted: admitted.length,
    sloTtftMs,
    cutAfter200: cut.length,
  };
  const text = await (await fetch(`${base}/metrics`)).text();
  const router = text.split("\n").filter((l) => /^tidegate_router_(shed_total|concurrency_(limit|cuts)|watchdog_fired_total)\{/.test(l) && !l.endsWith(" 0")).join("; ");
  console.log(`dev overload (${o.overloadS} s at ${o.overloadX} × capacity, ${(o.overloadX * o.capacityRequestsPerS).toFixed(1)} requests/s): ${overload.length} requests, ${admitted.length} admitted, ${shed.length} shed (429), ${other.length} other, ${cut.length} cut after their 200${cut.length > 0 ? ` (first: ${cut[0]!.tokens} of ${MAX_TOKENS} tokens)` : ""}`);
  console.log(`  429 latency p50 ${quantile(shed.map((s) => s.ttftMs), 0.5).toFixed(2)} ms, p99 ${figures.shedP99Ms.toFixed(2)} ms; admitted TTFT p50 ${quantile(admittedTtft, 0.5).toFixed(1)} ms, p99 ${figures.admittedTtftP99Ms.toFixed(1)} ms (SLO ${sloTtftMs}); mean TPOT ${mean(admitted.map((s) => s.tpotMs).filter(Number.isFinite)).toFixed(1)} ms`);
  console.log(`  dev used ${cores.toFixed(2)} cores; load average ${load0.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after; router: ${router}`);
  return figures;
}
