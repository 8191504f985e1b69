/**
 * bench:keystage — QUART (§5–6) against the baselines of its own evaluation (§8), in virtual time
 * (test/bench/keystage-run.ts).
 *
 * Main comparison (QUART §8.1–8.3). Key-stage scaling (Erlang C key-stage detection, the PID corrector acting on every
 * stage whose queueing delay exceeds its target, the CV smoother) whose new replicas start from a host-memory stage
 * cache, against whole-pipeline scaling as INFless, InferLine and Cocktail do it: whole pipelines added (every stage
 * to the largest count any stage asks for), each new replica loading its stage from its server's disk, no stage
 * cache. Rates are QUART's figures: disk 43 GB in 45 s (BERT-21B on one A40, §3) = 0.956 GB/s per stage replica;
 * host memory → GPU one of 8 stages of it (5.4 GB) in 0.8 s (Fig. 1, §6.1) = 6.72 GB/s. Host memory is capped: each
 * server's stage cache holds 2 stages of the model (the rest of its memory is other models' stages, §6.1: "the CPU
 * memory is not abundant enough to cache all models on every server"), preloaded round robin (server j: stages 2j and
 * 2j + 1 mod S); a key-stage replica placed where its stage is not cached reads it from disk (and caches it, LRU
 * above 85%). Every system starts at one replica per stage (§8.3: "set the initial replicas for all scaling to 1");
 * both hold at most the same GPU budget. Rounds alternate A B A B.
 *
 * Ablation (labelled, no target): the comparison this bench made before issue 35 — both policies with the same
 * start costs (stage cache, uncapped host memory, DEFAULT_CLUSTER); only the split differs. It reports GPU-seconds
 * at equal goodput: each arm's GPU-seconds per SLO-meeting output token (∫ GPUs dt ÷ good tokens), key-stage ÷
 * whole-pipeline.
 *
 * Streams (QUART §8.3): Gamma inter-arrivals with CV 0.1, 1, 2, 4, 8 at the Azure 2023 code trace's mean rate
 * (high against one replica a stage: the budget below is ⌈λ·E[stage]/0.7⌉ replicas a stage), token lengths drawn
 * from that trace; and the code trace itself (consecutive windows). QUART's real workload is the Azure Functions
 * trace (MAF); it is not in /work/shared/data (its README: the 2019 and 2021 archives are not obtainable), so the
 * bursty Azure LLM production trace (inter-arrival CV ≈ 13) stands in for it, labelled as such. Models: bloom-176b in
 * 8 stages ([9,9,9,9,9,9,8,8] layers) and llama2-70b in 4 stages (20 layers each), one H100 per stage replica. GPU
 * budget (the same for every arm): S × ⌈λ · E[stage time] / 0.7⌉. SLO: 2 × each request's profiled inference time
 * (QUART §8.2).
 *
 * Figures per (model, stream), medians over rounds: mean, p75, p99 latency (ms), goodput (output tokens/s of requests
 * within the SLO), SLO attainment, average queue length per stage, mean GPUs held, GPU-seconds. Targets (issue 35,
 * against the disk-loading whole-pipeline baseline): at CV ≥ 4 goodput ≥ 2×; at CV ≥ 2 mean latency ≥ 35% lower; at
 * CV 0.1 not worse (mean latency ≤ and goodput ≥); key-stage finishes every request (verdicts/keystage.ts). Where a
 * target is missed the bench prints what limits it: the baseline's disk-load time against the stream's span, and the
 * key-stage arm with instant starts. BENCH_ROUNDS / BENCH_REQUESTS change the run: it is then partial (met false).
 * The last line printed is one JSON object; exits 0 whether or not met.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { defaultDataDir, sharedDataDir } from "../../core/paths.js";
import { diskStartMs, startMs } from "../../region/keystage/cache.js";
import { DEFAULT_CLUSTER, parsePipeline, type ClusterConfig } from "../../region/keystage/keystage-config.js";
import type { PipelineRequest } from "../../region/keystage/pipeline.js";
import { runPipeline, type RunResult } from "./keystage-run.js";
import { Pipeline } from "../../region/keystage/stages.js";
import type { KeyStageParams } from "../../region/strategies/keystage.js";
import { cvStream, streamCv, traceCv, traceRatePerS, traceStream } from "../../sim/workload/keystage-workload.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { readTrace } from "../../sim/replay/traces.js";
import { packageVersion as version, median } from "./common.js";
import { envOverrides, jsonFigure, verdictOf, type Check } from "./verdicts/common.js";
import { KEYSTAGE_TARGET as TARGET, keystageArmOf, keystageChecks } from "./verdicts/keystage.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000);
const CVS = [0.1, 1, 2, 4, 8];
const SLO_FACTOR = 2;
const PLANNED_UTILIZATION = 0.7;
const SHRUNK = envOverrides(["BENCH_ROUNDS", "BENCH_REQUESTS", "KEYSTAGE_RELEASE_AFTER_MS"]);
const MODELS = [
  { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [9, 9, 9, 9, 9, 9, 8, 8], profileTp: 8 },
  { model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [20, 20, 20, 20], profileTp: 4 },
];


const r1 = (x: number) => Number(x.toFixed(1));
const r3 = (x: number) => Number(x.toFixed(3));

/** QUART's load figures (§3, §6.1 Fig. 1): BERT-21B, 43 GB, from disk in 45 s; one of its 8 stages from host memory in 0.8 s. */
const QUART_DISK_BYTES_PER_S = 43e9 / 45;
const QUART_HOST_BYTES_PER_S = 43e9 / 8 / 0.8;
/**
 * Scale-in of the main comparison, the same for every arm there: a stage (a whole pipeline for the baseline) idle
 * above its smoothed need for this long gives a replica back (releaseAfterMs; serverless systems release idle
 * instances, QUART's Smooth reclaims surplus, §5.2). The ablation holds its budget (releaseAfterMs 0), as before.
 */
const RELEASE_AFTER_MS = Number(process.env.KEYSTAGE_RELEASE_AFTER_MS ?? 60_000);
/** Stages of the model one server's stage cache holds (host memory cap). */
const CACHED_STAGES_PER_SERVER = 2;

type Summary = Pick<RunResult, "meanMs" | "p75Ms" | "p99Ms" | "goodputTokensPerS" | "sloAttainment" | "avgQueuePerStage" | "meanGpus" | "gpuSeconds" | "completed" | "requests">;

/** An arm's medians over rounds, unrounded (keystageArmOf's for the checks; issue 45: compare first, round what is printed). */
function summarize(rs: RunResult[]): Summary {
  const n = rs[0]!.avgQueuePerStage.length;
  return {
    ...keystageArmOf(rs),
    p75Ms: median(rs.map((r) => r.p75Ms)),
    p99Ms: median(rs.map((r) => r.p99Ms)),
    sloAttainment: median(rs.map((r) => r.sloAttainment)),
    avgQueuePerStage: Array.from({ length: n }, (_, s) => median(rs.map((r) => r.avgQueuePerStage[s]!))),
    meanGpus: median(rs.map((r) => r.meanGpus)),
    gpuSeconds: median(rs.map((r) => r.gpuSeconds)),
  };
}

/** A summary as printed: ms, GPUs and GPU-seconds to 0.1, rates, fractions and queues to 0.001 (+Infinity stays). */
function rounded(x: Summary): Summary {
  return { ...x, meanMs: r1(x.meanMs), p75Ms: r1(x.p75Ms), p99Ms: r1(x.p99Ms), goodputTokensPerS: r3(x.goodputTokensPerS), sloAttainment: r3(x.sloAttainment), avgQueuePerStage: x.avgQueuePerStage.map(r3), meanGpus: r1(x.meanGpus), gpuSeconds: r1(x.gpuSeconds) };
}

/** An arm's summary for the JSON line, rounded as printed: +Infinity (unfinished requests) as a string. */
const jsonSafe = (x: Summary) => Object.fromEntries(Object.entries(rounded(x)).map(([key, v]) => [key, typeof v === "number" ? jsonFigure(v) : v]));

/** GPU-seconds per SLO-meeting output token of one run (∫ GPUs dt ÷ good tokens): GPU-seconds at equal goodput. */
const gpuSecondsPerGoodToken = (r: RunResult) => r.meanGpus / r.goodputTokensPerS;

function line(label: string, r: RunResult): string {
  return `${label.padEnd(22)} mean ${(r.meanMs / 1000).toFixed(2)} s  p75 ${(r.p75Ms / 1000).toFixed(2)} s  p99 ${(r.p99Ms / 1000).toFixed(2)} s  goodput ${r.goodputTokensPerS.toFixed(2)} tok/s  SLO ${(r.sloAttainment * 100).toFixed(1)}%  done ${r.completed}/${r.requests}  GPUs mean ${r.meanGpus.toFixed(1)} peak ${r.scaler.peakGpus} (${r.gpuSeconds.toFixed(0)} GPU-s)  starts ${r.scaler.added} (cache hits ${r.scaler.cacheHits}, misses ${r.scaler.cacheMisses}, disk ${r.scaler.diskLoads})  queue/stage ${r.avgQueuePerStage.map((q) => q.toFixed(2)).join(" ")}`;
}

async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} cpus (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  console.log(`versions: node ${process.version}, typescript ${version("typescript")}, tidegate ${process.env.npm_package_version ?? "0.1.0"}`);
  const dataDir = defaultDataDir();
  const trace = readTrace("azure-code", dataDir);
  const rate = traceRatePerS(trace);
  const params = resolveStrategy("keystage", {}).params as KeyStageParams;
  const serverless: KeyStageParams = { ...params, releaseAfterMs: RELEASE_AFTER_MS };
  console.log(`inputs: ${dataDir}/azure_llm_2023 code trace: ${trace.requests.length} requests, mean rate ${rate.toFixed(3)} req/s, inter-arrival CV ${traceCv(trace).toFixed(2)}; ${REQUESTS} requests a stream, ${ROUNDS} rounds (seeds 1..${ROUNDS}; trace windows), SLO ${SLO_FACTOR} × profiled time`);
  console.log(`inputs: the Azure Functions trace (MAF) QUART used is not in ${sharedDataDir()} (README: not obtainable); the Azure LLM 2023 code trace stands in as the production trace`);
  console.log(`inputs: keystage params ${JSON.stringify(serverless)} (main comparison; the ablation with releaseAfterMs ${params.releaseAfterMs})`);
  console.log(`inputs: QUART loads — disk ${(QUART_DISK_BYTES_PER_S / 1e9).toFixed(3)} GB/s per stage replica (43 GB in 45 s), host memory → GPU ${(QUART_HOST_BYTES_PER_S / 1e9).toFixed(2)} GB/s (5.4 GB stage in 0.8 s); stage cache ${CACHED_STAGES_PER_SERVER} stages of the model per server`);
  console.log(`inputs: ablation cluster (equal starts, no cap) ${JSON.stringify(DEFAULT_CLUSTER)}`);

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
    const maxStageBytes = Math.max(...pipeline.stageBytes);
    const quart: ClusterConfig = {
      ...DEFAULT_CLUSTER,
      pcieBytesPerS: QUART_HOST_BYTES_PER_S,
      diskBytesPerS: QUART_DISK_BYTES_PER_S,
      hostMemoryBytes: ((CACHED_STAGES_PER_SERVER * maxStageBytes) / DEFAULT_CLUSTER.evictAbove) * (1 + 1e-9),
    };
    const preloaded = Array.from({ length: servers }, (_, j) => Array.from({ length: CACHED_STAGES_PER_SERVER }, (_, t) => (CACHED_STAGES_PER_SERVER * j + t) % S));
    const diskLoadS = diskStartMs(maxStageBytes, quart) / 1000;
    const hitS = startMs(maxStageBytes, true, quart) / 1000;
    console.log(`\n${m.model}: ${S} stages ${JSON.stringify(m.layersPerStage)} layers, stage weights ${(maxStageBytes / 2 ** 30).toFixed(1)} GiB (model ${(pipeline.stageBytes.reduce((a, b) => a + b, 0) / 1e9).toFixed(0)} GB), mean stage time ${(meanStageMs / 1000).toFixed(3)} s, profiled time of a mean request ${(pipeline.profiledMs(2048, 28, DEFAULT_CLUSTER.networkBytesPerS) / 1000).toFixed(2)} s; GPU budget ${budget} (${perStage} a stage on an even split), ${servers} servers of ${DEFAULT_CLUSTER.gpusPerServer} GPUs, other tenants hold ${JSON.stringify(occupied)}`);
    console.log(`${m.model}: a new replica serves after ${diskLoadS.toFixed(1)} s from disk (the baseline; a key-stage cache miss) or ${hitS.toFixed(2)} s from the stage cache; host memory ${(quart.hostMemoryBytes / 1e9).toFixed(0)} GB a server for this model's stages, preloaded ${JSON.stringify(preloaded)}`);
    const modelOut: Record<string, unknown> = { stages: S, budgetGpus: budget, diskLoadS: r1(diskLoadS), cacheHitLoadS: Number(hitS.toFixed(2)), hostMemoryBytesPerServer: Math.round(quart.hostMemoryBytes) };
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
    type Arm = "keyStage" | "wholePipelineDisk" | "ablationKeyStage" | "ablationWholePipeline" | "keyStageInstant";
    const arms: Record<Arm, { label: string; run: (reqs: PipelineRequest[]) => RunResult }> = {
      keyStage: { label: "key-stage (QUART)", run: (reqs) => runPipeline({ pipeline, requests: reqs, mode: "key-stage", budgetGpus: budget, params: serverless, cluster: quart, occupied, sloFactor: SLO_FACTOR, preloaded }) },
      wholePipelineDisk: { label: "whole-pipeline, disk", run: (reqs) => runPipeline({ pipeline, requests: reqs, mode: "whole-pipeline", budgetGpus: budget, params: serverless, cluster: quart, occupied, sloFactor: SLO_FACTOR, loadFrom: "disk" }) },
      ablationKeyStage: { label: "ablation key-stage", run: (reqs) => runPipeline({ pipeline, requests: reqs, mode: "key-stage", budgetGpus: budget, params, cluster: DEFAULT_CLUSTER, occupied, sloFactor: SLO_FACTOR }) },
      ablationWholePipeline: { label: "ablation whole-pipeline", run: (reqs) => runPipeline({ pipeline, requests: reqs, mode: "whole-pipeline", budgetGpus: budget, params, cluster: DEFAULT_CLUSTER, occupied, sloFactor: SLO_FACTOR }) },
      // What limits key-stage (printed, no target): the same arm with instant starts (no fork, no copy, no disk).
      keyStageInstant: { label: "key-stage, instant starts", run: (reqs) => runPipeline({ pipeline, requests: reqs, mode: "key-stage", budgetGpus: budget, params: serverless, cluster: { ...quart, pcieBytesPerS: 1e15, diskBytesPerS: 1e15, forkMs: 0 }, occupied, sloFactor: SLO_FACTOR, preloaded }) },
    };
    for (const st of streams) {
      const runs = Object.fromEntries(Object.keys(arms).map((a) => [a, [] as RunResult[]])) as Record<Arm, RunResult[]>;
      for (let round = 1; round <= ROUNDS; round++) {
        const reqs = st.make(round);
        const order: Arm[] = round % 2 === 1 ? ["keyStage", "wholePipelineDisk", "ablationKeyStage", "ablationWholePipeline", "keyStageInstant"] : ["wholePipelineDisk", "keyStage", "ablationWholePipeline", "ablationKeyStage", "keyStageInstant"];
        console.log(`${m.model} ${st.name} round ${round}: ${reqs.length} requests over ${(reqs[reqs.length - 1]!.arrivalMs / 1000).toFixed(0)} s, realised CV ${streamCv(reqs).toFixed(2)}`);
        for (const a of order) {
          const r = arms[a].run(reqs);
          runs[a].push(r);
          console.log(`  ${line(arms[a].label, r)}`);
        }
      }
      const k = summarize(runs.keyStage);
      const w = summarize(runs.wholePipelineDisk);
      const goodputRatio = w.goodputTokensPerS > 0 ? k.goodputTokensPerS / w.goodputTokensPerS : Number.NaN;
      const meanReduction = 1 - k.meanMs / w.meanMs;
      const ak = summarize(runs.ablationKeyStage);
      const aw = summarize(runs.ablationWholePipeline);
      const gpuAtEqualGoodput = median(runs.ablationKeyStage.map(gpuSecondsPerGoodToken)) / median(runs.ablationWholePipeline.map(gpuSecondsPerGoodToken));
      const inst = summarize(runs.keyStageInstant);
      console.log(`${m.model} ${st.name} medians, key-stage vs the disk-loading whole-pipeline baseline: goodput ratio ${goodputRatio.toFixed(3)}, mean latency ${(meanReduction * 100).toFixed(1)}% lower with key-stage; p99 ${rounded(k).p99Ms} vs ${rounded(w).p99Ms} ms; GPU-s ${rounded(k).gpuSeconds} vs ${rounded(w).gpuSeconds}; done ${k.completed}/${k.requests} vs ${w.completed}/${w.requests} (fewest in a round)`);
      console.log(`${m.model} ${st.name} ablation (equal starts, stage cache for both): goodput ratio ${(ak.goodputTokensPerS / aw.goodputTokensPerS).toFixed(3)}, mean latency ${((1 - ak.meanMs / aw.meanMs) * 100).toFixed(1)}% lower with key-stage; GPU-seconds at equal goodput (per SLO-meeting token) key-stage ÷ whole-pipeline ${gpuAtEqualGoodput.toFixed(3)} (GPU-s ${rounded(ak).gpuSeconds} vs ${rounded(aw).gpuSeconds})`);
      console.log(`${m.model} ${st.name} limit: key-stage with instant starts mean ${rounded(inst).meanMs} ms, goodput ${rounded(inst).goodputTokensPerS} (${(inst.goodputTokensPerS / w.goodputTokensPerS).toFixed(3)}× the baseline's); mean GPUs held / budget: key-stage ${(k.meanGpus / budget).toFixed(2)}, baseline ${(w.meanGpus / budget).toFixed(2)}`);
      modelOut[st.name] = {
        keyStage: jsonSafe(k),
        wholePipelineDisk: jsonSafe(w),
        goodputRatio: jsonFigure(goodputRatio),
        meanLatencyReduction: jsonFigure(meanReduction),
        ablation: {
          keyStage: { meanMs: jsonFigure(ak.meanMs, 1), goodputTokensPerS: jsonFigure(ak.goodputTokensPerS), gpuSeconds: jsonFigure(ak.gpuSeconds, 1) },
          wholePipeline: { meanMs: jsonFigure(aw.meanMs, 1), goodputTokensPerS: jsonFigure(aw.goodputTokensPerS), gpuSeconds: jsonFigure(aw.gpuSeconds, 1) },
          goodputRatio: jsonFigure(ak.goodputTokensPerS / aw.goodputTokensPerS),
          gpuSecondsAtEqualGoodputRatio: jsonFigure(gpuAtEqualGoodput),
        },
        limits: { keyStageInstantStartsGoodputRatio: jsonFigure(inst.goodputTokensPerS / w.goodputTokensPerS), keyStageMeanGpusOverBudget: jsonFigure(k.meanGpus / budget), baselineMeanGpusOverBudget: jsonFigure(w.meanGpus / budget) },
      };
      checks.push(...keystageChecks([{ name: `${m.model} ${st.name}`, cv: st.cv, keyStage: k, wholePipeline: w }]));
    }
    out[m.model] = modelOut;
  }
  const verdict = verdictOf(checks, SHRUNK);
  for (const c of checks.filter((x) => !x.ok)) console.log(`target missed: ${c.check} = ${jsonFigure(c.value)} (limit ${c.limit})`);
  if (verdict.partial === true) console.log(`partial run (met false): ${SHRUNK.join(", ")}`);
  console.log(JSON.stringify({ bench: "keystage", baseline: "whole-pipeline loading from disk (QUART §8: INFless, InferLine, Cocktail)", releaseAfterMs: RELEASE_AFTER_MS, rounds: ROUNDS, requestsPerStream: REQUESTS, sloFactor: SLO_FACTOR, results: out, checks: checks.map((c) => ({ ...c, value: jsonFigure(c.value) })), target: TARGET, met: verdict.met, ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}), ...(verdict.missed.length > 0 ? { missed: verdict.missed } : {}) }));
}

main().catch((err: unknown) => {
  console.error(err);
  console.log(JSON.stringify({ bench: "keystage", error: String(err), target: TARGET, met: false }));
});
