/**
 * bench:keystage — key-stage scaling (QUART §5–6) against whole-pipeline scaling on pipelined models, in virtual time
 * (region/keystage/run.ts). Both policies run the same controller (Erlang C key-stage detection, PID corrector,
 * CV smoother), the same GPU budget, the same cluster, stage cache and placement; the only difference is the split:
 * key-stage scales each stage on its own, whole-pipeline scales every stage together (each stage gets the largest
 * count any stage asks for, within ⌊budget / S⌋). Rounds alternate A B A B.
 *
 * Streams (QUART §8.3): Gamma inter-arrivals with CV 0.1, 1, 2, 4, 8 at the Azure 2023 code trace's mean rate, token
 * lengths drawn from that trace; and the code trace itself (consecutive windows). Models: bloom-176b in 8 stages
 * ([9,9,9,9,9,9,8,8] layers) and llama2-70b in 4 stages (20 layers each), one H100 per stage replica. GPU budget
 * (the planner's share, the same for both): S × ⌈λ · E[stage time] / 0.7⌉ — every stage at 70% utilization at the
 * mean rate, on an even split. SLO: 2 × each request's profiled inference time (QUART §8.2).
 *
 * Figures per (model, stream), medians over rounds: mean, p75, p99 latency (ms), goodput (output tokens/s of requests
 * within the SLO), SLO attainment, average queue length per stage, mean GPUs held. Targets (issue 13): at CV ≥ 4
 * key-stage goodput ≥ 2 × whole-pipeline; at CV ≥ 2 key-stage mean latency ≥ 35% lower; at CV 0.1 key-stage not
 * worse (median mean latency ≤ and goodput ≥ whole-pipeline's); key-stage finishes every request (an unfinished
 * one is +Infinity latency and an SLO miss; verdicts/keystage.ts). BENCH_ROUNDS / BENCH_REQUESTS change the run: it
 * is then partial (met false). The last line printed is one JSON object; exits 0 whether or not met.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { defaultDataDir } from "../../core/paths.js";
import { DEFAULT_CLUSTER, parsePipeline } from "../../region/keystage/keystage-config.js";
import type { ScalingMode } from "../../region/keystage/corrector.js";
import type { PipelineRequest } from "../../region/keystage/pipeline.js";
import { runPipeline, type RunResult } from "../../region/keystage/run.js";
import { Pipeline } from "../../region/keystage/stages.js";
import type { KeyStageParams } from "../../region/strategies/keystage.js";
import { cvStream, streamCv, traceCv, traceRatePerS, traceStream } from "../../sim/workload/keystage-workload.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { readTrace } from "../../sim/replay/traces.js";
import { packageVersion as version, median } from "./common.js";
import { envOverrides, jsonFigure, verdictOf, type Check } from "./verdicts/common.js";
import { KEYSTAGE_TARGET as TARGET, keystageChecks } from "./verdicts/keystage.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000);
const CVS = [0.1, 1, 2, 4, 8];
const SLO_FACTOR = 2;
const PLANNED_UTILIZATION = 0.7;
const SHRUNK = envOverrides(["BENCH_ROUNDS", "BENCH_REQUESTS"]);
const MODELS = [
  { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [9, 9, 9, 9, 9, 9, 8, 8], profileTp: 8 },
  { model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [20, 20, 20, 20], profileTp: 4 },
];



const r1 = (x: number) => Number(x.toFixed(1));
/** An arm's summary for the JSON line: +Infinity (unfinished requests) as a string. */
const jsonSafe = (x: Summary) => Object.fromEntries(Object.entries(x).map(([key, v]) => [key, typeof v === "number" ? jsonFigure(v) : v]));
const r3 = (x: number) => Number(x.toFixed(3));

type Summary = Pick<RunResult, "meanMs" | "p75Ms" | "p99Ms" | "goodputTokensPerS" | "sloAttainment" | "avgQueuePerStage" | "meanGpus" | "completed" | "requests">;

function summarize(rs: RunResult[]): Summary {
  const n = rs[0]!.avgQueuePerStage.length;
  return {
    meanMs: r1(median(rs.map((r) => r.meanMs))),
    p75Ms: r1(median(rs.map((r) => r.p75Ms))),
    p99Ms: r1(median(rs.map((r) => r.p99Ms))),
    goodputTokensPerS: r3(median(rs.map((r) => r.goodputTokensPerS))),
    sloAttainment: r3(median(rs.map((r) => r.sloAttainment))),
    avgQueuePerStage: Array.from({ length: n }, (_, s) => r3(median(rs.map((r) => r.avgQueuePerStage[s]!)))),
    meanGpus: r1(median(rs.map((r) => r.meanGpus))),
    completed: Math.min(...rs.map((r) => r.completed)),
    requests: rs[0]!.requests,
  };
}

function line(r: RunResult): string {
  return `${r.mode.padEnd(14)} mean ${(r.meanMs / 1000).toFixed(2)} s  p75 ${(r.p75Ms / 1000).toFixed(2)} s  p99 ${(r.p99Ms / 1000).toFixed(2)} s  goodput ${r.goodputTokensPerS.toFixed(2)} tok/s  SLO ${(r.sloAttainment * 100).toFixed(1)}%  done ${r.completed}/${r.requests}  GPUs mean ${r.meanGpus.toFixed(1)} peak ${r.scaler.peakGpus}  starts ${r.scaler.added} (cache hits ${r.scaler.cacheHits}, misses ${r.scaler.cacheMisses})  queue/stage ${r.avgQueuePerStage.map((q) => q.toFixed(2)).join(" ")}`;
}

async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} cpus (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  console.log(`versions: node ${process.version}, typescript ${version("typescript")}, tidegate ${process.env.npm_package_version ?? "0.1.0"}`);
  const dataDir = defaultDataDir();
  const trace = readTrace("azure-code", dataDir);
  const rate = traceRatePerS(trace);
  const params = resolveStrategy("keystage", {}).params as KeyStageParams;
  console.log(`inputs: ${dataDir}/azure_llm_2023 code trace: ${trace.requests.length} requests, mean rate ${rate.toFixed(3)} req/s, inter-arrival CV ${traceCv(trace).toFixed(2)}; ${REQUESTS} requests a stream, ${ROUNDS} rounds (seeds 1..${ROUNDS}; trace windows), SLO ${SLO_FACTOR} × profiled time`);
  console.log(`inputs: keystage params ${JSON.stringify(params)}; cluster ${JSON.stringify(DEFAULT_CLUSTER)}`);

  const out: Record<string, unknown> = {};
  const checks: Check[] = [];
  for (const m of MODELS) {
    const pipeline = new Pipeline(parsePipeline(m, `models.${m.model}`));
    const S = pipeline.stages;
    const meanStageMs = Math.max(...Array.from({ length: S }, (_, s) => trace.requests.reduce((a, q) => a + pipeline.stageMs(s, q.promptTokens, q.outputTokens), 0) / trace.requests.length));
    const perStage = Math.ceil((rate * meanStageMs) / 1000 / PLANNED_UTILIZATION);
    const budget = S * perStage;
    const servers = Math.ceil((budget * 1.5) / DEFAULT_CLUSTER.gpusPerServer);
    // Other tenants hold a third of the region's GPUs (round robin), so placement meets partly full servers.
    const occupied = Array.from({ length: servers }, (_, j) => (j % 3 === 0 ? DEFAULT_CLUSTER.gpusPerServer / 2 : j % 3 === 1 ? 2 : 0));
    console.log(`\n${m.model}: ${S} stages ${JSON.stringify(m.layersPerStage)} layers, stage weights ${(pipeline.stageBytes[0]! / 2 ** 30).toFixed(1)} GiB, mean stage time ${(meanStageMs / 1000).toFixed(3)} s, profiled time of a mean request ${(pipeline.profiledMs(2048, 28, DEFAULT_CLUSTER.networkBytesPerS) / 1000).toFixed(2)} s; GPU budget ${budget} (${perStage} a stage on an even split), ${servers} servers of ${DEFAULT_CLUSTER.gpusPerServer} GPUs, other tenants hold ${JSON.stringify(occupied)}`);
    const modelOut: Record<string, unknown> = { stages: S, budgetGpus: budget };
    const streams: { name: string; cv: number | undefined; make: (round: number) => PipelineRequest[] }[] = [
      ...CVS.map((cv) => ({ name: `cv${cv}`, cv, make: (round: number) => cvStream({ trace, cv, ratePerS: rate, count: REQUESTS, seed: round }) })),
      {
        name: "azure-code",
        cv: undefined,
        make: (round: number) => {
          const start = Math.floor(((round - 1) * (trace.requests.length - REQUESTS)) / Math.max(1, ROUNDS - 1));
          const w = traceStream(trace).slice(start, start + REQUESTS);
          const t0 = w[0]!.arrivalMs;
          return w.map((q, id) => ({ ...q, id, arrivalMs: q.arrivalMs - t0 }));
        },
      },
    ];
    for (const st of streams) {
      const runs: Record<ScalingMode, RunResult[]> = { "key-stage": [], "whole-pipeline": [] };
      for (let round = 1; round <= ROUNDS; round++) {
        const reqs = st.make(round);
        const order: ScalingMode[] = round % 2 === 1 ? ["key-stage", "whole-pipeline"] : ["whole-pipeline", "key-stage"];
        console.log(`${m.model} ${st.name} round ${round}: ${reqs.length} requests over ${(reqs[reqs.length - 1]!.arrivalMs / 1000).toFixed(0)} s, realised CV ${streamCv(reqs).toFixed(2)}`);
        for (const mode of order) {
          const r = runPipeline({ pipeline, requests: reqs, mode, budgetGpus: budget, params, cluster: DEFAULT_CLUSTER, occupied, sloFactor: SLO_FACTOR });
          runs[mode].push(r);
          console.log(`  ${line(r)}`);
        }
      }
      const k = summarize(runs["key-stage"]);
      const w = summarize(runs["whole-pipeline"]);
      const goodputRatio = w.goodputTokensPerS > 0 ? k.goodputTokensPerS / w.goodputTokensPerS : Number.NaN;
      const meanReduction = 1 - k.meanMs / w.meanMs;
      console.log(`${m.model} ${st.name} medians: goodput ratio ${goodputRatio.toFixed(3)}, mean latency ${(meanReduction * 100).toFixed(1)}% lower with key-stage; p99 ${k.p99Ms} vs ${w.p99Ms} ms; done ${k.completed}/${k.requests} vs ${w.completed}/${w.requests} (fewest in a round)`);
      modelOut[st.name] = { keyStage: jsonSafe(k), wholePipeline: jsonSafe(w), goodputRatio: jsonFigure(goodputRatio), meanLatencyReduction: jsonFigure(meanReduction) };
      checks.push(...keystageChecks([{ name: `${m.model} ${st.name}`, cv: st.cv, keyStage: k, wholePipeline: w }]));
    }
    // Diagnostics (no target), at CV 8: (a) is the start time what limits key-stage? Both policies with instant
    // replica starts (host memory and network as fast as wanted, no fork cost). (b) Key-stage with no moves between
    // stages (maxMovesPerPass 0): key stages grow only from free GPUs.
    const instant = { ...DEFAULT_CLUSTER, pcieBytesPerS: 1e15, networkBytesPerS: 1e15, forkMs: 0 };
    const noMoves = { ...params, maxMovesPerPass: 0 };
    const diag: Record<string, RunResult[]> = { keyInstant: [], wholeInstant: [], keyNoMoves: [], whole: [] };
    for (let round = 1; round <= ROUNDS; round++) {
      const reqs = cvStream({ trace, cv: 8, ratePerS: rate, count: REQUESTS, seed: round });
      const base = { pipeline, requests: reqs, budgetGpus: budget, occupied, sloFactor: SLO_FACTOR };
      diag.keyInstant!.push(runPipeline({ ...base, mode: "key-stage", params, cluster: instant }));
      diag.wholeInstant!.push(runPipeline({ ...base, mode: "whole-pipeline", params, cluster: instant }));
      diag.keyNoMoves!.push(runPipeline({ ...base, mode: "key-stage", params: noMoves, cluster: DEFAULT_CLUSTER }));
      diag.whole!.push(runPipeline({ ...base, mode: "whole-pipeline", params, cluster: DEFAULT_CLUSTER }));
    }
    const d = Object.fromEntries(Object.entries(diag).map(([k, v]) => [k, summarize(v)]));
    console.log(`${m.model} diagnostic, CV 8 with instant replica starts: key-stage mean ${d.keyInstant!.meanMs} ms goodput ${d.keyInstant!.goodputTokensPerS}; whole-pipeline mean ${d.wholeInstant!.meanMs} ms goodput ${d.wholeInstant!.goodputTokensPerS}`);
    console.log(`${m.model} diagnostic, CV 8 key-stage without moves between stages: mean ${d.keyNoMoves!.meanMs} ms goodput ${d.keyNoMoves!.goodputTokensPerS} (whole-pipeline ${d.whole!.meanMs} ms, ${d.whole!.goodputTokensPerS})`);
    modelOut.diagnosticsCv8 = {
      instantStarts: { keyStageMeanMs: jsonFigure(d.keyInstant!.meanMs, 1), wholePipelineMeanMs: jsonFigure(d.wholeInstant!.meanMs, 1), goodputRatio: jsonFigure(d.keyInstant!.goodputTokensPerS / d.wholeInstant!.goodputTokensPerS) },
      keyStageNoMoves: { meanMs: jsonFigure(d.keyNoMoves!.meanMs, 1), goodputRatio: jsonFigure(d.keyNoMoves!.goodputTokensPerS / d.whole!.goodputTokensPerS) },
    };
    out[m.model] = modelOut;
  }
  const verdict = verdictOf(checks, SHRUNK);
  for (const c of checks.filter((x) => !x.ok)) console.log(`target missed: ${c.check} = ${jsonFigure(c.value)} (limit ${c.limit})`);
  if (verdict.partial === true) console.log(`partial run (met false): ${SHRUNK.join(", ")}`);
  console.log(JSON.stringify({ bench: "keystage", rounds: ROUNDS, requestsPerStream: REQUESTS, sloFactor: SLO_FACTOR, results: out, checks: checks.map((c) => ({ ...c, value: jsonFigure(c.value) })), target: TARGET, met: verdict.met, ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}), ...(verdict.missed.length > 0 ? { missed: verdict.missed } : {}) }));
}

main().catch((err: unknown) => {
  console.error(err);
  console.log(JSON.stringify({ bench: "keystage", error: String(err), target: TARGET, met: false }));
});
