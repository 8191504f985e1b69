/**
 * How fast a model's engines send tokens, from the performance model (core/perf): what the stream watchdog
 * (watchdog.ts) expects of a running stream, so that a region or engine that stopped sending is told apart from one
 * that is merely busy without one fixed limit for every model (issue 32, item 3).
 *
 * `tbtMs`: the expected inter-token time at its slowest regular step — one decode iteration at the engine's full batch
 * (`engines.models.<m>.maxBatch`, default 256) holding its whole KV cache. There is no bound on the silence of a
 * healthy stream while its region reports: an engine short of KV memory preempts running requests and recomputes them
 * later (vLLM's preemption; the simulated engine's too), so a stream can be silent for many seconds on a healthy
 * engine. A first version held such streams to 2 × (one decode step + one full-context prefill) and cut healthy
 * streams in test/e2e/live-vs-replay.test.ts; the watchdog now uses the pace only once the region stopped reporting.
 *
 * The slowest over the GPU types the model is served on (its endpoints in `regions[].endpoints`, at
 * `models[].gpusPerInstance` GPUs each), and scaled by `engines.timeScale` (1 unless set: simulated engines, in process or engine-sim behind openai-http, run at it). Undefined for a model without a measured profile on any of its GPU types (the watchdog then
 * falls back to telemetry age and `router.streamStallMs`). Pure: config in, numbers out.
 */
import { modelEngineSettings, type TidegateConfig } from "../core/config.js";
import { MODEL_SPECS, type ModelName } from "../core/models.js";
import { DEFAULT_MAX_BATCH, getProfile } from "../core/perf/model.js";

/** A model's token pace (ms). */
export interface TokenPace {
  tbtMs: number;
  /**
   * The prefill time of a `tokens`-token prompt alone (ms, the slowest of its GPU types, time-scaled): the part of a
   * request's TTFT that its prompt explains (router/concurrency.ts takes it off the samples).
   */
  prefillMs(tokens: number): number;
  /**
   * A decode step at the engine's full batch with 1,024 tokens of context per request (within its KV): how long a
   * request sent when a slot is free may wait before its prefill starts (router/concurrency.ts).
   */
  stepMs: number;
  /**
   * One decode iteration of `batch` requests holding `contextTokens` of KV in all, on one instance (ms, the slowest of
   * its GPU types, time-scaled): router/spill.ts's drain time of a region's running requests.
   */
  decodeIterMs(batch: number, contextTokens: number): number;
  /** Most requests one instance runs at once (`engines.models.<m>.maxBatch`, default 256). */
  maxBatch: number;
}

/** The token pace of every configured model that has a profile; `undefined` for the others. */
export function tokenPaceFrom(config: TidegateConfig): (model: ModelName) => TokenPace | undefined {
  const paces = new Map<ModelName, TokenPace>();
  const scale = config.engines.timeScale;
  for (const m of config.models) {
    if (MODEL_SPECS[m.name] === undefined) continue;
    let pace: TokenPace | undefined;
    const gpus = new Set(config.regions.flatMap((r) => r.endpoints.filter((e) => e.model === m.name).map((e) => e.gpu)));
    for (const gpu of gpus) {
      const tp = m.gpusPerInstance[gpu];
      if (tp === undefined) continue;
      let profile;
      try {
        profile = getProfile(m.name, gpu, tp);
      } catch {
        continue; // no measured profile for this (model, GPU, TP): the other GPU types decide
      }
      const settings = modelEngineSettings(config.engines, m.name);
      const kvTokens = settings.kvCapacityTokens ?? profile.kvCapacityTokens;
      const batch = settings.maxBatch ?? DEFAULT_MAX_BATCH;
      const tbtMs = profile.decodeIterMs(batch, kvTokens) * scale;
      const stepMs = profile.decodeIterMs(batch, Math.min(kvTokens, batch * 1024)) * scale;
      const p = profile;
      const prefill = (tokens: number) => p.prefillMs(Math.max(1, tokens)) * scale;
      const iter = (b: number, ctx: number) => p.decodeIterMs(Math.max(1, b), Math.max(0, ctx)) * scale;
      const prev = pace;
      pace =
        prev === undefined
          ? { tbtMs, prefillMs: prefill, stepMs, decodeIterMs: iter, maxBatch: batch }
          : { tbtMs: Math.max(prev.tbtMs, tbtMs), prefillMs: (t) => Math.max(prev.prefillMs(t), prefill(t)), stepMs: Math.max(prev.stepMs, stepMs), decodeIterMs: (b, c) => Math.max(prev.decodeIterMs(b, c), iter(b, c)), maxBatch: batch };
    }
    if (pace !== undefined) paces.set(m.name, pace);
  }
  return (model) => paces.get(model);
}
