/**
 * bench:overload — does the router shed early and fairly (issue 32, item 1 and "What it must show")? Two regions,
 * each `tidegate region` (openai-http) in front of two `tidegate engine-sim` processes (llama3.2-3b, max_num_seqs
 * MAX_BATCH, KV enough for a full batch), and `tidegate global`, on the default configuration (adaptive concurrency
 * on) with two API keys of equal weight, tenants "a" and "b". Phases, every load open-loop (Poisson arrivals) and
 * bounded in count and time, loopback only:
 *
 *   1. capacity: each engine fed directly by MAX_BATCH closed-loop workers (its whole batch busy), started spread over
 *      one request's lifetime, tokens counted for CAPACITY_S after that lifetime: completion tokens/s of the four —
 *      the fleet's capacity measured unloaded, with no hop and no queue (`capacity` says why the spread);
 *   2. warm-up through the router at capacity's request rate for WARMUP_S (V8 compiles the hot path), then 0.3 × that
 *      rate for UNLOADED_S, measured: the unloaded TTFT (mean, p99) and TPOT;
 *   3. overload: 3 × capacity's request rate for OVERLOAD_S, two thirds from tenant a and one third from tenant b
 *      (both above an equal share, so the split of goodput is the router's doing, not the offered load's);
 *   4. normal: 0.5 × capacity's rate for NORMAL_S.
 *
 * Goodput: output tokens/s, over the overload phase, of its requests that met the SLO — TTFT ≤ max(1,000 ms,
 * 2 × the unloaded p99) and TPOT ≤ max(100 ms, 2 × the unloaded p99 TPOT) (the configuration's default SLO, as
 * bench:strategies widens it for a slow model). The JSON line holds (verdicts/overload.ts): goodput ≥ 0.9 ×
 * capacity; p99 latency of a 429 ≤ 20 ms; admitted p99 TTFT ≤ 2 × unloaded; no engine taken out of service;
 * the global router's RSS growth ≤ 20% from the start of the overload to SETTLE_S after the normal phase (nothing sent
 * meanwhile: V8's young generation, grown under the overload from 8 to 32 MiB, is usually given back by then — not in
 * every run; the heap's spaces are printed so a miss can be read); TTFT back to normal (each later 1 s window's median
 * ≤ 1.5 × the unloaded mean, no 429) within 5 s of the overload's end; tenants a and b each 0.45–0.55 of goodput; no
 * overload request answered other than 200 or 429 (5xx, timeouts) and no admitted stream cut short; and no check on a
 * baseline (the capacity arm, the unloaded phase) that failed a request. The JSON `target` holds every threshold,
 * with `thisRun`: the SLO and the normal TTFT this run's unloaded phase set.
 *
 * Then the `tidegate dev` arm (issue 49): the same fleet — two regions of two llama3.2-3b instances, the same engine
 * settings, here in-process simulated engines — and the router in one `tidegate dev` process (static actuator, its
 * default SLO), once the processes above are stopped: warm-up at capacity's request rate for WARMUP_S, 0.3 × it for
 * DEV_UNLOADED_S (printed), then 10 × the capacity measured in phase 1 for DEV_OVERLOAD_S from tenants a and b
 * alike. Held (the JSON line's `target.dev`, verdicts/overload.ts): p99 latency of a 429 ≤ 50 ms, admitted p99 TTFT
 * ≤ the configured TTFT SLO, no stream cut after its 200 (answered 200 and not finished with [DONE]).
 *
 * BENCH_OVERLOAD_SECONDS (overload length), BENCH_OVERLOAD_DEV_SECONDS (the dev arm's), BENCH_OVERLOAD_TIME_SCALE and
 * BENCH_OVERLOAD_CONFIG (JSON merged into the config's `router`, e.g. '{"concurrency":{"adaptive":false}}' for the
 * fixed-limit arm; both arms) change the inputs: such a run is partial. The last line is one JSON object; exits 0
 * either way.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { freePort, spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";
import { quantile } from "./sse-load.js";
import { KEYS, MAX_BATCH, MAX_TOKENS, MODEL, agent, capacity, cpuSeconds, mean, openLoop, rssKiB, servedInFull, type Sample, type Tenant } from "./overload-load.js";
import { runDevArm } from "./overload-dev.js";
import { envOverrides, jsonFigure } from "./verdicts/common.js";
import { DEV_OVERLOAD_TARGET, OVERLOAD_TARGET, devOverloadChecks, goodputSlo, overloadBenchVerdict, overloadChecks, recoverySeconds, type DevOverloadFigures, type OverloadFigures } from "./verdicts/overload.js";

const TIME_SCALE = Number(process.env.BENCH_OVERLOAD_TIME_SCALE ?? 12);
const OVERLOAD_S = Number(process.env.BENCH_OVERLOAD_SECONDS ?? 60);
const CAPACITY_S = 15;
const WARMUP_S = 8;
/** After the normal phase, nothing is sent for this long before the router's RSS is read again. */
const SETTLE_S = 10;
const UNLOADED_S = 30;
const NORMAL_S = 20;
/** The dev arm: its unloaded phase and its overload at DEV_OVERLOAD_X × capacity (s). */
const DEV_UNLOADED_S = 15;
const DEV_OVERLOAD_S = Number(process.env.BENCH_OVERLOAD_DEV_SECONDS ?? 30);
const DEV_OVERLOAD_X = 10;
/** The JSON line's targets: the multi-process arm's, and the dev arm's under `dev`. */
const TARGET = { ...OVERLOAD_TARGET, dev: DEV_OVERLOAD_TARGET };
const SHRUNK = envOverrides(["BENCH_OVERLOAD_SECONDS", "BENCH_OVERLOAD_DEV_SECONDS", "BENCH_OVERLOAD_TIME_SCALE", "BENCH_OVERLOAD_CONFIG"]);
const REGIONS = ["r-a", "r-b"] as const;
const ENGINES_PER_REGION = 2;
async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "tidegate-bench-overload-"));
  const regions: Proc[] = [];
  try {
    console.log(`machine: nproc=${cpus().length} memory=${(totalmem() / 2 ** 30).toFixed(1)} GiB load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}; node ${process.version}`);
    const engineArgs = ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--port", "0", "--time-scale", String(TIME_SCALE), "--max-batch", String(MAX_BATCH)];
    const engines = await Promise.all(Array.from({ length: REGIONS.length * ENGINES_PER_REGION }, (_, i) => spawnTidegate(`engine-sim ${i}`, engineArgs, /(http:\/\/127\.0\.0\.1:\d+)/)));
    const engineUrls = engines.map((e) => e.match[1]!);
    const ports = await Promise.all(REGIONS.map(() => freePort()));
    const configFile = join(dir, "bench.json");
    const routerExtra = process.env.BENCH_OVERLOAD_CONFIG === undefined ? {} : (JSON.parse(process.env.BENCH_OVERLOAD_CONFIG) as object);
    writeFileSync(
      configFile,
      JSON.stringify({
        models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
        regions: REGIONS.map((name, i) => ({ name, proximity: REGIONS.filter((o) => o !== name), grpcAddress: `127.0.0.1:${ports[i]}`, gpus: [{ type: "h100-80gb", count: 2 * ENGINES_PER_REGION }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: ENGINES_PER_REGION }] })),
        router: { port: 0, apiKeys: [{ key: KEYS.a, tenant: "a" }, { key: KEYS.b, tenant: "b" }], ...routerExtra },
        queue: { backend: "embedded", dataDir: join(dir, "data") },
        controller: { actuator: "static" },
        engines: { kind: "openai-http", timeScale: TIME_SCALE, models: { [MODEL]: { maxBatch: MAX_BATCH } }, urls: Object.fromEntries(REGIONS.map((r, i) => [`${r}/${MODEL}`, engineUrls.slice(i * ENGINES_PER_REGION, (i + 1) * ENGINES_PER_REGION)])) },
      }),
    );
    for (const r of REGIONS) regions.push(await spawnTidegate(`region ${r}`, ["region", "--config", configFile, "--region", r, "--log-level", "warn"], /grpc \S+ metrics/));
    const global = await spawnTidegate("global", ["global", "--config", configFile, "--port", "0", "--log-level", "warn"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
    const base = global.match[1]!;
    for (const r of REGIONS) {
      const deadline = Date.now() + 30_000;
      while (!((await (await fetch(`${base}/healthz`)).json()) as { regions: Record<string, { available: boolean }> }).regions[r]?.available) {
        if (Date.now() > deadline) throw new Error(`region ${r} not available`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }

    const cap = await capacity(engineUrls, CAPACITY_S);
    console.log(`capacity (4 engines fed directly, ${MAX_BATCH} streams each started spread over a request's lifetime, ${CAPACITY_S} s counted): ${cap.tokensPerS.toFixed(0)} tokens/s, ${cap.requestsPerS.toFixed(1)} requests/s, mean TPOT ${cap.tpotMs.toFixed(1)} ms; ${cap.requests} requests, ${cap.failed} not served in full`);
    const both = (i: number): Tenant => (i % 2 === 0 ? "a" : "b");
    const rssSpawned = rssKiB(global.child.pid!);
    // Warm-up at the fleet's capacity: V8 compiles the hot path and sizes its heap for load, so that the RSS check
    // below measures growth over the overload, not the first load the process ever saw.
    await openLoop(base, "warmup", cap.requestsPerS, WARMUP_S, both, 1);
    const unloadedAll = await openLoop(base, "unloaded", 0.3 * cap.requestsPerS, UNLOADED_S, both, 2);
    const unloaded = unloadedAll.filter((s) => s.status === 200);
    const unloadedFailed = unloadedAll.filter((s) => !servedInFull(s)).length;
    const unloadedTtft = unloaded.map((s) => s.ttftMs);
    const unloadedTpot = unloaded.map((s) => s.tpotMs).filter(Number.isFinite);
    const unloadedP99 = quantile(unloadedTtft, 0.99);
    const slo = goodputSlo(unloadedP99, quantile(unloadedTpot, 0.99));
    const sloTtftMs = slo.ttftMs;
    const sloTpotMs = slo.tpotMs;
    const normalTtftMs = OVERLOAD_TARGET.recoveryNormalOverUnloadedMean * mean(unloadedTtft);
    console.log(`unloaded (${unloadedAll.length} requests at 0.3 × capacity, ${unloadedFailed} not served in full): TTFT mean ${mean(unloadedTtft).toFixed(1)} ms, p99 ${unloadedP99.toFixed(1)} ms; TPOT p99 ${quantile(unloadedTpot, 0.99).toFixed(1)} ms; SLO TTFT ≤ ${sloTtftMs.toFixed(0)} ms, TPOT ≤ ${sloTpotMs.toFixed(0)} ms`);

    const heapOf = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const get = (re: RegExp) => Number(re.exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
      return `heap used ${get(/^nodejs_heap_size_used_bytes (\S+)$/m).toFixed(1)} of ${get(/^nodejs_heap_size_total_bytes (\S+)$/m).toFixed(1)} MiB (new space ${get(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)$/m).toFixed(1)}, old ${get(/^nodejs_heap_space_size_total_bytes\{space="old"\} (\S+)$/m).toFixed(1)}), external ${get(/^nodejs_external_memory_bytes (\S+)$/m).toFixed(1)}`;
    };
    const heapBefore = await heapOf();
    const rssBefore = rssKiB(global.child.pid!);
    const procs: [string, number][] = [["global", global.child.pid!], ...regions.map((p, i): [string, number] => [`region ${REGIONS[i]}`, p.child.pid!]), ...engines.map((e, i): [string, number] => [`engine ${i}`, e.child.pid!]), ["bench (clients)", process.pid]];
    const cpuBefore = procs.map(([, pid]) => cpuSeconds(pid));
    const overStart = Date.now();
    // Two thirds of the arrivals from tenant a, one third from b.
    const overloadP = openLoop(base, "overload", 3 * cap.requestsPerS, OVERLOAD_S, (i) => (i % 3 === 2 ? "b" : "a"), 3);
    // The limits through the overload, read from /metrics every 2 s (printed below).
    const trace: string[] = [];
    for (let t = 0; t < OVERLOAD_S; t += 2) {
      await new Promise((r) => setTimeout(r, 2000));
      const text = await (await fetch(`${base}/metrics`)).text();
      const lim = [...text.matchAll(/^tidegate_router_concurrency_limit\{region="([^"]+)"[^}]*\} (\S+)$/gm)].map((m) => m[2]).join("/");
      trace.push(`${lim}@${(rssKiB(global.child.pid!) / 1024).toFixed(0)}M`);
    }
    const overEnd = Date.now();
    const cpuOver = procs.map(([name, pid], i) => `${name} ${((cpuSeconds(pid) - cpuBefore[i]!) / ((overEnd - overStart) / 1000)).toFixed(2)}`);
    const normal = await openLoop(base, "normal", 0.5 * cap.requestsPerS, NORMAL_S, both, 4);
    const overload = await overloadP;
    // Under the overload V8 grows its young generation (new space 8 → 32 MiB measured; old space flat) and usually
    // gives it back once allocation slows: RSS is read again after SETTLE_S without load, so that what stays is read.
    const rssPeak = rssKiB(global.child.pid!);
    await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
    const rssAfter = rssKiB(global.child.pid!);
    const heapAfter = await heapOf();

    const meets = (s: Sample) => servedInFull(s) && s.ttftMs <= sloTtftMs && s.tpotMs <= sloTpotMs;
    const admitted = overload.filter((s) => s.status === 200);
    const shed = overload.filter((s) => s.status === 429);
    const other = overload.filter((s) => s.status !== 200 && s.status !== 429);
    const cut = admitted.filter((s) => !servedInFull(s));
    const goodTokens = (t: Tenant) => overload.filter((s) => s.tenant === t && meets(s)).reduce((a, s) => a + s.tokens, 0);
    const tenantGoodput: [number, number] = [goodTokens("a"), goodTokens("b")];
    // Goodput over the overload's length (requests admitted late in it finish after it; their tokens count).
    const goodputTokensPerS = (tenantGoodput[0] + tenantGoodput[1]) / ((overEnd - overStart) / 1000);
    const ejectedLines = regions.flatMap((p) => p.output().split("\n").filter((l) => /taken out of service|ejected/i.test(l)));
    const windows: string[] = [];
    for (let w = 0; w < 8; w++) {
      const inW = normal.filter((s) => s.startMs >= overEnd + w * 1000 && s.startMs < overEnd + (w + 1) * 1000);
      windows.push(`${mean(inW.filter((s) => s.status === 200).map((s) => s.ttftMs)).toFixed(0)}${inW.some((s) => s.status !== 200) ? "!" : ""}`);
    }
    console.log(`normal phase, mean TTFT per 1 s window from the overload's end (ms; ! = a request not served): ${windows.join(" ")}`);
    const recoveryS = recoverySeconds(
      normal.map((s) => ({ startMs: s.startMs, ttftMs: s.ttftMs, shed: s.status !== 200 })),
      overEnd,
      normalTtftMs,
      OVERLOAD_TARGET.recoveryWindowMs,
    );
    const figures: OverloadFigures = {
      capacityTokensPerS: cap.tokensPerS,
      goodputTokensPerS,
      shedP99Ms: shed.length === 0 ? Number.NaN : quantile(shed.map((s) => s.ttftMs), 0.99),
      admittedTtftP99Ms: quantile(admitted.map((s) => (Number.isNaN(s.ttftMs) ? Number.POSITIVE_INFINITY : s.ttftMs)), 0.99),
      unloadedTtftP99Ms: unloadedP99,
      ejected: ejectedLines.length,
      rssGrowth: (rssAfter - rssBefore) / rssBefore,
      recoveryS,
      tenantGoodput,
      shed: shed.length,
      other: other.length,
      cutStreams: cut.length,
      capacity: { requests: cap.requests, failed: cap.failed },
      unloaded: { requests: unloadedAll.length, failed: unloadedFailed },
    };
    console.log(`overload (${OVERLOAD_S} s at 3 × capacity, tenants a:b offered 2:1): ${overload.length} requests, ${admitted.length} admitted, ${shed.length} shed (429), ${other.length} other (${[...new Set(other.map((x) => x.status))].join(", ") || "none"}), ${cut.length} admitted streams cut short`);
    console.log(`  goodput ${goodputTokensPerS.toFixed(0)} tokens/s (${(goodputTokensPerS / cap.tokensPerS).toFixed(3)} × capacity); admitted TTFT p50 ${quantile(admitted.map((s) => s.ttftMs), 0.5).toFixed(1)} ms, p99 ${figures.admittedTtftP99Ms.toFixed(1)} ms; mean TPOT ${mean(admitted.map((s) => s.tpotMs).filter(Number.isFinite)).toFixed(1)} ms; 429 latency p50 ${quantile(shed.map((s) => s.ttftMs), 0.5).toFixed(2)} ms, p99 ${figures.shedP99Ms.toFixed(2)} ms`);
    console.log(`  tenant goodput a ${tenantGoodput[0]} tokens, b ${tenantGoodput[1]} tokens; engines taken out of service: ${ejectedLines.length}${ejectedLines.length > 0 ? ` (${ejectedLines[0]!.slice(0, 200)})` : ""}`);
    console.log(`normal (${NORMAL_S} s at 0.5 × capacity): ${normal.filter((s) => s.status === 200).length} ok, ${normal.filter((s) => s.status === 429).length} shed; TTFT back to normal after ${recoveryS} s; global RSS ${(rssSpawned / 1024).toFixed(1)} MiB at start, ${(rssBefore / 1024).toFixed(1)} before the overload, ${(rssPeak / 1024).toFixed(1)} at the end of the normal phase, ${(rssAfter / 1024).toFixed(1)} MiB ${SETTLE_S} s later`);
    const limits = (await (await fetch(`${base}/metrics`)).text()).split("\n").filter((l) => l.startsWith("tidegate_router_concurrency_") || l.startsWith("tidegate_router_shed_total{model=\"llama3.2-3b\""));
    console.log(`router: ${limits.join("; ")}`);
    console.log(`limits (region a/b) and the global's RSS every 2 s through the overload: ${trace.join(" ")}`);
    console.log(`CPU cores used during the overload: ${cpuOver.join(", ")}`);
    console.log(`global before the overload: ${heapBefore}; ${SETTLE_S} s after the normal phase: ${heapAfter}`);
    const checks = overloadChecks(figures);
    for (const c of checks) console.log(`  ${c.ok ? "ok  " : "MISS"} ${c.check}: ${jsonFigure(c.value)} (target ${c.limit})`);
    // The dev arm, once the processes above are stopped (their cores back).
    await stopAll();
    let dev: DevOverloadFigures | undefined;
    let devError: string | undefined;
    try {
      dev = await runDevArm({ dir, regions: REGIONS, enginesPerRegion: ENGINES_PER_REGION, timeScale: TIME_SCALE, capacityRequestsPerS: cap.requestsPerS, routerExtra, warmupS: WARMUP_S, unloadedS: DEV_UNLOADED_S, overloadS: DEV_OVERLOAD_S, overloadX: DEV_OVERLOAD_X });
    } catch (err) {
      devError = err instanceof Error ? err.message.split("\n")[0] : String(err);
      console.log(`dev arm failed: ${devError}`);
    }
    for (const c of devOverloadChecks(dev)) console.log(`  ${c.ok ? "ok  " : "MISS"} ${c.check}: ${jsonFigure(c.value)} (target ${c.limit})`);
    const verdict = overloadBenchVerdict(figures, dev, SHRUNK);
    console.log(
      JSON.stringify({
        bench: "overload",
        capacityTokensPerS: jsonFigure(cap.tokensPerS, 1),
        goodputRatio: jsonFigure(goodputTokensPerS / cap.tokensPerS),
        shedP99Ms: jsonFigure(figures.shedP99Ms, 2),
        admittedTtftP99Ms: jsonFigure(figures.admittedTtftP99Ms, 1),
        unloadedTtftP99Ms: jsonFigure(unloadedP99, 1),
        ejected: figures.ejected,
        rssGrowth: jsonFigure(figures.rssGrowth),
        recoveryS: jsonFigure(recoveryS, 1),
        tenantShareA: jsonFigure(tenantGoodput[0] / Math.max(1, tenantGoodput[0] + tenantGoodput[1])),
        shed: shed.length,
        admitted: admitted.length,
        other: other.length,
        cutStreams: cut.length,
        capacity: { requests: cap.requests, failed: cap.failed },
        unloaded: { requests: unloadedAll.length, failed: unloadedFailed },
        dev:
          dev === undefined
            ? { error: devError }
            : { shedP99Ms: jsonFigure(dev.shedP99Ms, 2), admittedTtftP99Ms: jsonFigure(dev.admittedTtftP99Ms, 1), sloTtftMs: dev.sloTtftMs, cutAfter200: dev.cutAfter200, shed: dev.shed, admitted: dev.admitted },
        // Every threshold judged: the fixed ones, and what this run's unloaded phase made of the relative ones.
        target: { ...TARGET, thisRun: { sloTtftMs: jsonFigure(sloTtftMs, 1), sloTpotMs: jsonFigure(sloTpotMs, 1), sloTokens: MAX_TOKENS, normalTtftMs: jsonFigure(normalTtftMs, 1) } },
        ...verdict,
      }),
    );
  } catch (err) {
    for (const p of regions) console.error(p.output().split("\n").slice(-20).join("\n"));
    console.log(JSON.stringify({ bench: "overload", error: err instanceof Error ? err.message.split("\n")[0] : String(err), target: TARGET, met: false }));
  } finally {
    agent.destroy();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
