/**
 * The model-as-a-service setting (issue 33; BlitzScale §2.1, §3 and §6): one cluster serving many models, each idle
 * most of the time and bursty when it is not, through the replay wiring (router selection, the gateway's hold of
 * requests for a cold model, the simulated engine core, the region runtime with its controller — scale to zero after
 * `idleMs` idle, BlitzScale §5.3's `demand` policy — and the `sim` actuator with a loading source), in virtual time.
 *
 * - Models: `models` fine-tunes of one base (`<base>:mNN`, core/models.ts), each a model of its own — routed,
 *   scaled, cached and counted apart — with the base's architecture and performance profile.
 * - Workload (`maasWorkload`): model k's popularity is Zipf(`zipfS`) over the ranks; each model sees its own bursts:
 *   the whole trace (arrivals compressed by `speedup`) shifted circularly by a random offset per model, thinned to its
 *   share. So the total load is the trace's, its bursts land on different models at different times, and the
 *   unpopular models are cold most of the time.
 * - Cluster: `gpus` GPUs, an instance of any model on any `gpusPerInstance` of them. An idle model's instances drain to
 *   spot after `idleMs` (BlitzScale §5.3: 2 s); another model may redeploy that spot instance, a model coming back
 *   reclaims its own first (region/spot).
 * - Host memory: each instance's host (an instance record; a redeployed spot instance is the same host) caches at most
 *   `hostCacheModels` models, least recently used out, each for ServerlessLLM's 5-minute keep-alive after its last
 *   use (sources.ts KeepAliveCache): the `ssd` source's hits and misses come from the workload. The network sources
 *   load from a serving GPU or, for a model at zero, from the parameter pool's one host copy (BlitzScale §4.1, O(1)).
 * - Always-on (`alwaysOn`): every model holds a fixed count from the start and never scales — the GPU-hours a fleet
 *   without scale to zero needs for the same workload.
 */
import { mergeOverDefault, parseConfig, type TidegateConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { mulberry32 } from "../../core/random.js";
import type { ModelName } from "../../core/models.js";
import type { SimLoadingSettings } from "../../region/runtime/sim-loading.js";
import { GPU, replayFleet, type FleetReplay } from "../../sim/replay/loading.js";
import type { Trace, TraceRequest } from "../../sim/replay/traces.js";

/** The names of `n` models of `base` (`<base>:m00` …). */
export function maasModels(base: ModelName, n: number): ModelName[] {
  if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`models must be an integer ≥ 1, got ${n}`);
  return Array.from({ length: n }, (_, k) => `${base}:m${String(k).padStart(2, "0")}`);
}

/** Zipf(s) shares of `n` ranks: (1/k^s) / Σ (1/j^s), k = 1…n. */
export function zipfShares(n: number, s: number): number[] {
  const w = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** s);
  const total = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / total);
}

/**
 * The many-model workload (file comment): the trace compressed by `speedup`, for each model shifted circularly by a
 * random offset and thinned to its Zipf share; sorted by arrival. Deterministic for a seed.
 */
export function maasWorkload(trace: Trace, models: readonly ModelName[], zipfS: number, speedup: number, seed: number): Trace {
  if (!(speedup > 0)) throw new RangeError(`speedup must be > 0, got ${speedup}`);
  const rand = mulberry32(seed);
  const shares = zipfShares(models.length, zipfS);
  const span = trace.spanMs / speedup;
  const out: TraceRequest[] = [];
  models.forEach((model, k) => {
    const offset = rand() * span;
    for (const r of trace.requests) {
      if (rand() >= shares[k]!) continue;
      const at = r.arrivalMs / speedup + offset;
      out.push({ ...r, arrivalMs: span > 0 ? at % span : at, model });
    }
  });
  out.sort((a, b) => a.arrivalMs - b.arrivalMs);
  return { name: `${trace.name}×${speedup} over ${models.length} models (Zipf ${zipfS})`, requests: out, spanMs: out.length === 0 ? 0 : out[out.length - 1]!.arrivalMs };
}

export interface MaasFleet {
  base: ModelName;
  models: readonly ModelName[];
  gpus: number;
  maxInstances: number;
  kvCapacityTokens: number;
  /** Scale to zero after this long idle (ms; BlitzScale's 2 s). */
  idleMs: number;
  /** Fixed instances per model (always-on; no scale to zero); absent: every model starts at zero. */
  alwaysOn?: Readonly<Record<ModelName, number>>;
}

/** The one-region fleet of the model-as-a-service setting (file comment). */
export function maasConfig(f: MaasFleet): TidegateConfig {
  const gpusPerInstance = parseConfig(mergeOverDefault({})).models.find((m) => m.name === f.base)?.gpusPerInstance[GPU];
  if (gpusPerInstance === undefined) throw new RangeError(`model ${f.base} has no ${GPU} configuration`);
  const fixed = (m: ModelName) => f.alwaysOn?.[m] ?? 0;
  return parseConfig(mergeOverDefault({
    models: f.models.map((name) => ({ name, gpusPerInstance: { [GPU]: gpusPerInstance } })),
    regions: [{ name: "maas", utcOffsetH: 0, proximity: ["maas"], gpus: [{ type: GPU, count: f.gpus }], endpoints: f.models.map((model) => ({ model, gpu: GPU, instances: fixed(model), minInstances: fixed(model), maxInstances: Math.max(fixed(model), f.maxInstances) })) }],
    // The hold is bounded far beyond any load here: every request is served, its wait counted in its TTFT.
    controller: { strategy: "demand", actuator: "sim", scaleToZero: { idleMs: f.alwaysOn === undefined ? f.idleMs : 0, holdMs: 600_000, maxHeld: 1_000_000 } },
    engines: { models: Object.fromEntries(f.models.map((m) => [m, { kvCapacityTokens: f.kvCapacityTokens }])) },
  }));
}

/** What one arm of the setting measured, over the fleet replay (loading.ts FleetReplay). */
export interface MaasRun extends FleetReplay {
  config: TidegateConfig;
}

/** One arm: the workload on the fleet with `loading` under `strategy`. */
export async function runMaas(fleet: MaasFleet, workload: Trace, strategy: { name: string; params: Record<string, number> }, loading: SimLoadingSettings, seed = 1): Promise<MaasRun> {
  const config = maasConfig(fleet);
  const r = await replayFleet({ config, trace: workload, strategy, loading, seed });
  return { ...r, config };
}

/** Cold starts of a run: a model's instance that began serving while none of that model served, and its load time. */
export interface ColdStarts {
  /** Load time of each cold start, decision to serving (ms). */
  loadMs: number[];
  /** Per request index of `records`: whether its model had no serving instance when it arrived. */
  coldRequest: boolean[];
}

/** Finds the cold starts and the requests that arrived at a model with no serving instance (from the state changes). */
export function coldStartsOf(r: Pick<FleetReplay, "changes" | "records">): ColdStarts {
  const serving = new Map<ModelName, number>();
  const stateOf = new Map<string, string>();
  const loadMs: number[] = [];
  // Per model, the times it went from 0 to 1 serving and back to 0: arrivals in [down, up) found it cold.
  const coldSince = new Map<ModelName, number>();
  const windows = new Map<ModelName, [number, number][]>();
  for (const c of r.changes) {
    const was = stateOf.get(c.id);
    stateOf.set(c.id, c.state);
    const n = serving.get(c.model) ?? 0;
    if (was === "serving" && c.state !== "serving") {
      serving.set(c.model, n - 1);
      if (n - 1 === 0) coldSince.set(c.model, c.atMs);
    } else if (was !== "serving" && c.state === "serving") {
      serving.set(c.model, n + 1);
      if (n === 0) {
        loadMs.push(c.atMs - (c.actionAtMs ?? c.atMs));
        (windows.get(c.model) ?? windows.set(c.model, []).get(c.model)!).push([coldSince.get(c.model) ?? 0, c.atMs]);
        coldSince.delete(c.model);
      }
    }
  }
  const coldRequest = r.records.map((rec) => {
    const w = windows.get(rec.model) ?? [];
    if (w.some(([from, to]) => rec.arrivalMs >= from && rec.arrivalMs < to)) return true;
    const since = coldSince.get(rec.model);
    return since !== undefined && rec.arrivalMs >= since && (serving.get(rec.model) ?? 0) === 0;
  });
  return { loadMs, coldRequest };
}
