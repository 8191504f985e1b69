/**
 * `npm run bench:pd` (issue 48): prefill/decode disaggregation against colocated serving with chunked prefill, at the
 * same GPUs, by DistServe's goodput — the highest request rate at which ≥ 90% of requests meet TTFT ≤ max(1 s,
 * 2 × unloaded) and TPOT ≤ 100 ms (verdicts/pd.ts).
 *
 * How it runs: in virtual time, through the code the live region runs — one region `Gateway` (its default routing
 * policy, core/defaults.ts; its prefill/decode steps, region/gateway/pd.ts, as vLLM's proxy drives disaggregated
 * instances) in front of INSTANCES simulated engines (`SimEngine`, llama2-70b on 4 × H100 from the measured profiles:
 * Splitwise's model on Splitwise's traces). Every engine prefills in chunks of at most 8,192 tokens per step
 * (max_num_batched_tokens, vLLM's default for its API server on GPUs of ≥ 70 GiB: vllm/engine/arg_utils.py), the
 * baseline the field runs (vLLM V1 schedules so by default).
 * - colocated: INSTANCES instances that prefill and decode;
 * - disaggregated P:D: P prefill and INSTANCES − P decode instances; each request is prefilled on a prefill instance,
 *   its KV moved to a decode instance over the in-process fabric (engines/sim/kv-fabric.ts: the prompt's KV bytes at
 *   100 Gbps per GPU and direction, BlitzScale Table 1's RDMA, queued per side), which decodes it. Every P from
 *   1 to INSTANCES − 1 is searched; the best is the arm's figure.
 * A rate is the trace's own (the first PD_MINUTES of it, default 20) with its arrival times divided by a multiplier;
 * the search (maxPassingRate) doubles the multiplier while ≥ 90% meet the SLO, then bisects 5 times. A run stops once
 * more than 10% have missed (the rate fails), and at 10 virtual minutes past the last arrival (what is unfinished then
 * missed). Printed per trace: each arm's goodput (requests/s), its attainment there, p90 TTFT and TPOT, and for the
 * best disaggregated ratio the KV transfers' share of TTFT.
 * Targets: disaggregated ≥ 1.3 × colocated on azure-code (long prompts), ≥ 0.95 × on azure-conv. The last line is one
 * JSON object, printed whether or not met (and with the error when the run fails).
 */
import { cpus, loadavg, totalmem } from "node:os";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_PD_MIN_PREFILL_TOKENS, DEFAULT_ROUTING_POLICY } from "../../core/defaults.js";
import { shippedDataDir } from "../../core/paths.js";
import { getProfile } from "../../core/perf/model.js";
import type { GenerateRequest } from "../../core/ports.js";
import { KvFabric } from "../../engines/sim/kv-fabric.js";
import { SimEngine } from "../../engines/sim/sim-engine.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { PRESETS } from "../../region/gateway/scoring/routing-config.js";
import { readTrace, type TraceRequest } from "../../sim/replay/traces.js";
import { packageVersion as version } from "./common.js";
import { advanceYielding } from "../helpers/streams.js";
import { quantile } from "./sse-load.js";
import { envOverrides, jsonFigure, ratio, verdictOf, type Check } from "./verdicts/common.js";
import { PD_TARGET, attainment, maxPassingRate, meetsPdSlo, pdCheck, winningThreshold, type PdRecord } from "./verdicts/pd.js";

const MODEL = "llama2-70b";
const GPU = "h100-80gb";
const TP = 4;
/** vLLM's max_num_batched_tokens for its API server on a GPU of ≥ 70 GiB (vllm/engine/arg_utils.py). */
const MAX_NUM_BATCHED_TOKENS = 8192;
const INSTANCES = process.env.PD_INSTANCES === undefined ? 8 : Number(process.env.PD_INSTANCES);
const MINUTES = process.env.PD_MINUTES === undefined ? Number.POSITIVE_INFINITY : Number(process.env.PD_MINUTES);
/**
 * routing.pdMinPrefillTokens settings searched for the disaggregated arm (region/gateway/pd.ts `splits`: a request
 * whose uncached prompt is shorter goes whole to a decode instance, which prefills it in chunks itself; llm-d's P/D
 * threshold): 0 splits every request, as vLLM's proxy does. The winner — the highest geometric mean over the traces of
 * each threshold's best goodput ÷ colocated — must be the default (core/defaults.ts DEFAULT_PD_MIN_PREFILL_TOKENS).
 */
const THRESHOLDS = [0, 512, 1024, 2048, 4096] as const;
const TRACES = ["azure-code", "azure-conv"] as const;
const SHRUNK = envOverrides(["PD_INSTANCES", "PD_MINUTES"]);
/** Virtual time a run goes on past its last arrival before what is unfinished counts as missed. */
const DRAIN_MS = 10 * 60_000;

type Role = "prefill" | "decode" | "both";

interface Run {
  attainment: number;
  /** Stopped once over 10% had missed: attainment is then an upper bound below 0.9. */
  stoppedEarly: boolean;
  ttftP90Ms: number;
  tpotP90Ms: number;
  /** The median over the requests split in two of their KV pull's time ÷ their TTFT (0 colocated). */
  kvShareOfTtft: number;
  /** Share of the requests split in two (the rest went whole to a decode instance). */
  splitShare: number;
  /** Median TTFT of the requests split in two. */
  splitTtftP50Ms: number;
  kvPullMeanMs: number;
  wallMs: number;
}


/** One run: the trace at `multiplier` × its rate through a gateway over engines with `roles`. */
async function runFleet(reqs: readonly TraceRequest[], multiplier: number, roles: readonly Role[], pdMinPrefillTokens = 0): Promise<Run> {
  const started = performance.now();
  const clock = new VirtualClock();
  // Each split request's pull time, by request id, for its share of that request's TTFT.
  const pullMs = new Map<string, number>();
  const fabric = new KvFabric({ clock, observer: { kvPulled: (ms, _bytes, requestId) => void pullMs.set(requestId, ms), kvPullFailed: () => {} } });
  // A request booked on a prefill instance was split in two (pd.ts); the rest went whole to one instance.
  const split = new Set<string>();
  const gw = new Gateway({ region: "bench", clock, onRouted: (req, id) => void (id.startsWith("prefill-") && split.add(req.id)), routing: { policy: PRESETS[DEFAULT_ROUTING_POLICY], blockTokens: 16, pdMinPrefillTokens } });
  const engines = roles.map((role, i) => new SimEngine({ instanceId: `${role}-${i}`, model: MODEL, gpu: GPU, tp: TP, clock, events: "coalesced", maxNumBatchedTokens: MAX_NUM_BATCHED_TOKENS, prefixCache: false, ...(role === "both" ? {} : { role, kvFabric: fabric }) }));
  for (const e of engines) gw.addInstance(GPU, e);
  const profile = getProfile(MODEL, GPU, TP);
  const records: PdRecord[] = [];
  const allowedMisses = Math.floor((1 - PD_TARGET.attainment) * reqs.length);
  let missed = 0;
  let ended = 0;
  let stoppedEarly = false;
  const shares: number[] = [];
  const splitTtfts: number[] = [];
  for (let i = 0; i < reqs.length && !stoppedEarly; i++) {
    const t = reqs[i]!;
    const at = t.arrivalMs / multiplier;
    await advanceYielding(clock, at);
    const rec: PdRecord = { unloadedTtftMs: profile.prefillMs(t.promptTokens, 1) };
    records.push(rec);
    let firstAtMs = 0;
    const req: GenerateRequest = { id: `r${i}`, model: MODEL, kind: "chat", promptTokens: t.promptTokens, maxTokens: t.outputTokens, priority: 0, body: {}, blockHashes: [] };
    const end = () => {
      ended++;
      if (!meetsPdSlo(rec)) missed++;
    };
    try {
      const choice = gw.submit(req, {
        onFirstToken: (ms) => {
          firstAtMs = ms;
          rec.ttftMs = ms - at;
          const pulled = pullMs.get(req.id);
          if (pulled !== undefined && ms > at) {
            shares.push(pulled / (ms - at));
            splitTtfts.push(ms - at);
          }
        },
        onDone: (ms, generated) => {
          rec.tpotMs = generated > 1 ? (ms - firstAtMs) / (generated - 1) : 0;
          end();
        },
        onError: () => end(),
      });
      if (choice === undefined) end();
    } catch {
      end();
    }
    stoppedEarly = missed > allowedMisses;
  }
  const lastMs = (reqs.at(-1)?.arrivalMs ?? 0) / multiplier;
  // Drain: until every request ended, the run's verdict is known, or DRAIN_MS past the last arrival.
  while (!stoppedEarly && ended < records.length && clock.now() < lastMs + DRAIN_MS) {
    const next = clock.nextEventMs();
    if (next === undefined) break;
    await advanceYielding(clock, Math.min(next, lastMs + DRAIN_MS));
    stoppedEarly = missed > allowedMisses;
  }
  const ttfts = records.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]));
  const tpots = records.flatMap((r) => (r.tpotMs === undefined ? [] : [r.tpotMs]));
  const run: Run = {
    attainment: attainment(records) * (records.length / reqs.length),
    stoppedEarly,
    ttftP90Ms: quantile(ttfts, 0.9),
    tpotP90Ms: quantile(tpots, 0.9),
    kvShareOfTtft: shares.length === 0 ? 0 : quantile(shares, 0.5),
    splitShare: records.length === 0 ? 0 : split.size / records.length,
    splitTtftP50Ms: quantile(splitTtfts, 0.5),
    kvPullMeanMs: fabric.totals.pulls === 0 ? 0 : fabric.totals.pullMs / fabric.totals.pulls,
    wallMs: performance.now() - started,
  };
  await gw.close();
  await Promise.all(engines.map((e) => e.close()));
  return run;
}

interface Goodput {
  arm: string;
  multiplier: number;
  rate: number;
  run: Run | undefined;
}

/** The arm's goodput: the highest multiplier that passes, and its run there. */
async function goodputOf(arm: string, reqs: readonly TraceRequest[], baseRate: number, roles: readonly Role[], start: number, pdMinPrefillTokens = 0): Promise<Goodput> {
  const runs = new Map<number, Run>();
  const m = await maxPassingRate(async (mult) => {
    const r = await runFleet(reqs, mult, roles, pdMinPrefillTokens);
    runs.set(mult, r);
    console.log(`    ${arm} × ${mult.toFixed(3)} (${(mult * baseRate).toFixed(2)} req/s): attainment ${(r.attainment * 100).toFixed(1)}%${r.stoppedEarly ? " (stopped past 10% missed)" : ""}, p90 TTFT ${r.ttftP90Ms.toFixed(0)} ms, p90 TPOT ${r.tpotP90Ms.toFixed(1)} ms${r.kvPullMeanMs > 0 ? `, ${(r.splitShare * 100).toFixed(0)}% split, KV pull mean ${r.kvPullMeanMs.toFixed(1)} ms (median ${(r.kvShareOfTtft * 100).toFixed(1)}% of a split request's TTFT, whose median is ${r.splitTtftP50Ms.toFixed(0)} ms)` : ""} (${(r.wallMs / 1000).toFixed(1)} s wall)`);
    return r.attainment >= PD_TARGET.attainment;
  }, start);
  return { arm, multiplier: m, rate: m * baseRate, run: runs.get(m) };
}

const rolesOf = (prefill: number): Role[] => [...Array<Role>(prefill).fill("prefill"), ...Array<Role>(INSTANCES - prefill).fill("decode")];

async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} cpus (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  console.log(`versions: node ${process.version}, typescript ${version("typescript")}`);
  console.log(`fleet: ${INSTANCES} × ${MODEL} on ${TP} × ${GPU} (${INSTANCES * TP} GPUs; simulated from the measured profiles), max_num_batched_tokens ${MAX_NUM_BATCHED_TOKENS}, routing ${DEFAULT_ROUTING_POLICY}; KV over 100 Gbps per GPU and direction (RDMA, BlitzScale Table 1); SLO per request: TTFT ≤ max(${PD_TARGET.ttftFloorMs} ms, ${PD_TARGET.ttftUnloadedFactor} × unloaded), TPOT ≤ ${PD_TARGET.tpotMs} ms, goodput at ≥ ${PD_TARGET.attainment * 100}% attainment`);
  const checks: Check[] = [];
  const out: Record<string, unknown> = {};
  const byThreshold: Record<string, Record<number, number>> = {};
  for (const name of TRACES) {
    const trace = readTrace(name, shippedDataDir());
    const reqs = trace.requests.filter((r) => r.arrivalMs < MINUTES * 60_000);
    const spanS = Math.max(1, reqs.at(-1)!.arrivalMs / 1000);
    const baseRate = reqs.length / spanS;
    const prompt = reqs.reduce((a, r) => a + r.promptTokens, 0) / reqs.length;
    const output = reqs.reduce((a, r) => a + r.outputTokens, 0) / reqs.length;
    console.log(`\n${name}: ${Number.isFinite(MINUTES) ? `the first ${MINUTES} min` : "the whole trace"}, ${reqs.length} requests (${baseRate.toFixed(2)} req/s; mean prompt ${prompt.toFixed(0)}, output ${output.toFixed(0)} tokens)`);
    console.log(`  colocated (${INSTANCES} prefill+decode, chunked prefill):`);
    const colocated = await goodputOf("colocated", reqs, baseRate, Array<Role>(INSTANCES).fill("both"), 1);
    const ratios: (Goodput & { threshold: number })[] = [];
    for (const threshold of THRESHOLDS) {
      for (let p = 1; p < INSTANCES; p++) {
        console.log(`  disaggregated ${p}:${INSTANCES - p}, split from ${threshold} prompt tokens:`);
        ratios.push({ ...(await goodputOf(`${p}P:${INSTANCES - p}D`, reqs, baseRate, rolesOf(p), Math.max(0.25, colocated.multiplier), threshold)), threshold });
      }
    }
    const best = ratios.reduce((a, b) => (b.rate > a.rate ? b : a));
    const check = pdCheck(name, colocated.rate, best.rate);
    checks.push(check);
    console.log(`  goodput (req/s): colocated ${colocated.rate.toFixed(2)}; disaggregated P:D by split threshold:`);
    for (const threshold of THRESHOLDS) console.log(`    from ${String(threshold).padStart(4)} tokens: ${ratios.filter((r) => r.threshold === threshold).map((r) => `${r.arm} ${r.rate.toFixed(2)}`).join(", ")}`);
    console.log(`  best: ${best.arm} splitting from ${best.threshold} tokens, ${jsonFigure(check.value)} × colocated (target ≥ ${check.limit}); ${((best.run?.splitShare ?? Number.NaN) * 100).toFixed(0)}% of its requests split, its KV pull the median split request's ${((best.run?.kvShareOfTtft ?? Number.NaN) * 100).toFixed(1)}% of TTFT (their median TTFT ${(best.run?.splitTtftP50Ms ?? Number.NaN).toFixed(0)} ms)`);
    byThreshold[name] = Object.fromEntries(THRESHOLDS.map((t) => [t, ratio(Math.max(...ratios.filter((r) => r.threshold === t).map((r) => r.rate)), colocated.rate)]));
    out[name] = {
      requests: reqs.length,
      colocated: { reqPerS: jsonFigure(colocated.rate), attainment: jsonFigure(colocated.run?.attainment ?? Number.NaN), ttftP90Ms: jsonFigure(colocated.run?.ttftP90Ms ?? Number.NaN, 0), tpotP90Ms: jsonFigure(colocated.run?.tpotP90Ms ?? Number.NaN, 1) },
      disaggregated: Object.fromEntries(THRESHOLDS.map((t) => [`split${t}`, Object.fromEntries(ratios.filter((r) => r.threshold === t).map((r) => [r.arm, jsonFigure(r.rate)]))])),
      best: { ratio: best.arm, pdMinPrefillTokens: best.threshold, reqPerS: jsonFigure(best.rate), attainment: jsonFigure(best.run?.attainment ?? Number.NaN), ttftP90Ms: jsonFigure(best.run?.ttftP90Ms ?? Number.NaN, 0), tpotP90Ms: jsonFigure(best.run?.tpotP90Ms ?? Number.NaN, 1), splitShare: jsonFigure(best.run?.splitShare ?? Number.NaN), splitTtftP50Ms: jsonFigure(best.run?.splitTtftP50Ms ?? Number.NaN, 0), kvShareOfTtft: jsonFigure(best.run?.kvShareOfTtft ?? Number.NaN), kvPullMeanMs: jsonFigure(best.run?.kvPullMeanMs ?? Number.NaN, 1) },
      ratioToColocated: jsonFigure(check.value),
    };
  }
  // The default split threshold is the bench's winner over both traces.
  const win = winningThreshold(byThreshold);
  console.log(`\nsplit threshold (geometric mean over the traces of the best P:D ÷ colocated): ${THRESHOLDS.map((t) => `${t} → ${jsonFigure(win.score[t] ?? Number.NaN)}`).join(", ")}; winner ${win.threshold}, default ${DEFAULT_PD_MIN_PREFILL_TOKENS}`);
  checks.push({ check: `the default routing.pdMinPrefillTokens (${DEFAULT_PD_MIN_PREFILL_TOKENS}) is the winning split threshold (${win.threshold})`, value: win.threshold === DEFAULT_PD_MIN_PREFILL_TOKENS ? 1 : 0, limit: 1, ok: win.threshold === DEFAULT_PD_MIN_PREFILL_TOKENS });
  out.thresholdScores = Object.fromEntries(THRESHOLDS.map((t) => [t, jsonFigure(win.score[t] ?? Number.NaN)]));
  out.winningThreshold = win.threshold;
  for (const c of checks) console.log(`${c.ok ? "ok  " : "MISS"} ${c.check}: ${jsonFigure(c.value)} (limit ${c.limit})`);
  const v = verdictOf(checks, SHRUNK);
  console.log(JSON.stringify({ bench: "pd", model: MODEL, instances: INSTANCES, gpus: INSTANCES * TP, maxNumBatchedTokens: MAX_NUM_BATCHED_TOKENS, window: Number.isFinite(MINUTES) ? `${MINUTES} min` : "whole traces", ...out, checks: checks.map((c) => ({ check: c.check, value: jsonFigure(c.value), limit: c.limit, ok: c.ok })), target: PD_TARGET, met: v.met, ...(v.partial ? { partial: true, shrunk: v.shrunk } : {}), missed: v.missed }));
}

main().catch((err: unknown) => {
  console.log(JSON.stringify({ bench: "pd", met: false, error: err instanceof Error ? err.message : String(err), missed: ["the run failed"] }));
});
