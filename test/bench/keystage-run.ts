/**
 * One run of a pipelined instance under key-stage or whole-pipeline scaling, in virtual time: the same wiring the
 * bench and the tests use (VirtualClock, PipelineSim, Cluster, KeyStageScaler). Returns latency figures, goodput at
 * an SLO of `sloFactor` × each request's profiled inference time (QUART §8.2), and time-average queue per stage.
 */
import { VirtualClock } from "../../core/clock.js";
import type { ClusterConfig } from "../../region/keystage/keystage-config.js";
import type { ScalingMode } from "../../region/keystage/corrector.js";
import { PipelineSim, type PipelineRequest } from "../../region/keystage/pipeline.js";
import { Cluster, KeyStageScaler, type ScalerStats } from "../../region/keystage/scaler.js";
import type { Pipeline } from "../../region/keystage/stages.js";
import type { KeyStageParams } from "../../region/strategies/keystage.js";

/** One run: the pipeline, its requests, the policy, the budget, the controller parameters and the cluster. */
export interface RunOptions {
  pipeline: Pipeline;
  requests: readonly PipelineRequest[];
  mode: ScalingMode;
  budgetGpus: number;
  params: KeyStageParams;
  cluster: ClusterConfig;
  /** GPUs other tenants hold per server. */
  occupied: readonly number[];
  /** SLO = sloFactor × profiled inference time of the request. */
  sloFactor: number;
  /** Stop waiting for stragglers this long after the last arrival (ms). */
  drainLimitMs?: number;
  /** Where new replicas load from (scaler.ts `loadFrom`; default the stage cache). */
  loadFrom?: "stage-cache" | "disk";
  /** Stages each server's host memory holds before the run (index = server), e.g. [[0, 1], [2, 3], …]. */
  preloaded?: readonly (readonly number[])[];
}

/**
 * Figures of one run over every request (latencies in ms). A request not done when the run stops counts as an SLO
 * miss and as +Infinity latency: the mean is +Infinity when any is unfinished, a percentile when more than its tail
 * is. `completed` < `requests` says how many.
 */
export interface RunResult {
  mode: ScalingMode;
  requests: number;
  completed: number;
  meanMs: number;
  p75Ms: number;
  p99Ms: number;
  /** Output tokens/s of requests done within their SLO, over the span from first arrival to last completion. */
  goodputTokensPerS: number;
  /** Share of requests done within their SLO. */
  sloAttainment: number;
  avgQueuePerStage: number[];
  scaler: ScalerStats;
  /** Mean GPUs held over the run. */
  meanGpus: number;
  /** ∫ GPUs held dt over the run (GPU-seconds). */
  gpuSeconds: number;
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Runs the requests through the pipeline in virtual time until all are done (or `drainLimitMs` after the last). */
export function runPipeline(o: RunOptions): RunResult {
  const clock = new VirtualClock(0);
  const latencies: number[] = [];
  let goodTokens = 0;
  let good = 0;
  let lastDoneMs = 0;
  const link = o.cluster.networkBytesPerS;
  // The pipeline reports stopped replicas to the scaler, which is built after it.
  let scaler: KeyStageScaler | undefined;
  const sim = new PipelineSim({
    clock,
    pipeline: o.pipeline,
    linkBytesPerS: link,
    windowMs: o.params.windowMs,
    onDone: (req, doneMs) => {
      const lat = doneMs - req.arrivalMs;
      latencies.push(lat);
      lastDoneMs = doneMs;
      if (lat <= o.sloFactor * o.pipeline.profiledMs(req.promptTokens, req.outputTokens, link)) {
        good++;
        goodTokens += req.outputTokens;
      }
    },
    onReplicaStopped: (r) => scaler!.onReplicaStopped(r),
  });
  const cluster = new Cluster(o.cluster, o.occupied);
  o.preloaded?.forEach((stages, j) => stages.forEach((s) => cluster.preload(j, o.pipeline.layout.model, s, o.pipeline.stageBytes[s]!, 0)));
  const n = o.pipeline.stages;
  const meanP = o.requests.reduce((a, r) => a + r.promptTokens, 0) / o.requests.length;
  const meanO = o.requests.reduce((a, r) => a + r.outputTokens, 0) / o.requests.length;
  const ks = new KeyStageScaler({
    clock, sim, pipeline: o.pipeline, cluster, params: o.params, mode: o.mode, budgetGpus: o.budgetGpus,
    expectedServiceMs: Array.from({ length: n }, (_, s) => o.pipeline.stageMs(s, Math.round(meanP), Math.round(meanO))),
    cacheKey: o.pipeline.layout.model,
    loadFrom: o.loadFrom,
  });
  scaler = ks;
  ks.deployInitial();
  ks.start();
  for (const r of o.requests) clock.at(r.arrivalMs, () => sim.submit(r));
  const lastArrival = o.requests[o.requests.length - 1]!.arrivalMs;
  const limit = lastArrival + (o.drainLimitMs ?? 3_600_000);
  const stepMs = 60_000;
  while (sim.completed < o.requests.length && clock.now() < limit) clock.advanceToSync(Math.min(limit, clock.now() + stepMs));
  ks.stop();
  const avgQueuePerStage = sim.averageQueues();
  const completed = latencies.length;
  // Unfinished requests count as missing their SLO and as +Infinity latency; goodput's span runs to the run's end.
  const all = [...latencies, ...new Array<number>(o.requests.length - completed).fill(Number.POSITIVE_INFINITY)];
  const sorted = all.sort((a, b) => a - b);
  const spanMs = Math.max(1, (completed < o.requests.length ? clock.now() : lastDoneMs) - o.requests[0]!.arrivalMs);
  return {
    mode: o.mode,
    requests: o.requests.length,
    completed,
    meanMs: all.length === 0 ? Number.NaN : all.reduce((a, b) => a + b, 0) / all.length,
    p75Ms: quantile(sorted, 0.75),
    p99Ms: quantile(sorted, 0.99),
    goodputTokensPerS: (goodTokens * 1000) / spanMs,
    sloAttainment: good / o.requests.length,
    avgQueuePerStage,
    scaler: ks.stats,
    meanGpus: ks.stats.gpuMs / Math.max(1, clock.now()),
    gpuSeconds: ks.stats.gpuMs / 1000,
  };
}
