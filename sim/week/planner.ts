/**
 * The planner as the week replay sees it: once per simulated hour, history in, one `RegionTargets` per region out
 * (DESIGN "Planner (per hour)"). `HourlyPlanner` is the seam where planner/ (ARIMA + HiGHS ILP) plugs in; until it
 * does (`ilp-planner.ts` runs planner/ itself), `SeasonalPeakPlanner` is the dependency-free stand-in: a seasonal-naive peak forecast on 10-minute means (yesterday's next hour
 * rescaled by the last hour's level; the last hour's peak before a day of history exists), a NIW buffer β × last hour's batch
 * tokens/s, and the ILP's constraints solved greedily per model — per region N ≥ ⌈α·F(m, r) / tps(m, g)⌉, then
 * instances added where the fractional need is largest until Σ_r N·tps ≥ Σ_r F (load may be re-routed), within
 * [min, max] and each region's GPUs.
 */
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { RegionTargets } from "../../core/ports.js";
import type { FleetSpec } from "./fleet.js";

/** What the planner sees at the top of an hour. Series are per minute, oldest first, ending at `nowMs`. */
export interface PlannerInput {
  nowMs: number;
  decisionId: number;
  fleet: FleetSpec;
  /** Clock time of the first minute of the history series (≤ 0: warm-up history precedes the replay). */
  historyStartMs: number;
  /** Interactive demand (prompt + output tokens/s) per minute of clients in `region` for `model`. */
  history(model: ModelName, region: RegionName): Float64Array;
  /** Batch tokens/s submitted for `model` over the last hour (the β buffer's base). */
  niwTokensPerSLastHour(model: ModelName): number;
  /** Batch demand (tokens/s) per minute submitted from `region` for `model`, oldest first, ending at `nowMs`. */
  niwHistory(model: ModelName, region: RegionName): Float64Array;
  /** Instances (serving + deploying) of the endpoint now. */
  current(model: ModelName, region: RegionName, gpu: GpuType): number;
  /** Spot instances of the model in the region on that GPU type now (reclaimable without a redeploy). */
  spot(model: ModelName, region: RegionName, gpu: GpuType): number;
  /** Prompt + output tokens/s one instance serves at the SLO (the ILP's tps(m, g)). */
  tps(model: ModelName, gpu: GpuType): number;
}

/** An hourly planner: ARIMA + ILP (planner/) or the stand-in below. May be async (worker threads, WASM solver). */
export interface HourlyPlanner {
  readonly name: string;
  plan(input: PlannerInput): RegionTargets[] | Promise<RegionTargets[]>;
  /** Releases worker threads and the like (optional). */
  close?(): Promise<void>;
}

const MIN_PER_H = 60;

/** Minutes per window of the series the forecast works on (DESIGN: an hourly or 10-minute series). */
const WINDOW_MIN = 10;

/** Means of consecutive `WINDOW_MIN`-minute windows of a per-minute series, aligned to its end. */
function windows(series: Float64Array): Float64Array {
  const n = Math.floor(series.length / WINDOW_MIN);
  const out = new Float64Array(n);
  const off = series.length - n * WINDOW_MIN;
  for (let w = 0; w < n; w++) {
    let s = 0;
    for (let k = 0; k < WINDOW_MIN; k++) s += series[off + w * WINDOW_MIN + k]!;
    out[w] = s / WINDOW_MIN;
  }
  return out;
}

/**
 * Seasonal-naive forecast of the next hour's peak (tokens/s) from a per-minute series, on 10-minute means: the
 * peak 10-minute window of the same hour yesterday, rescaled by how the last hour compares with yesterday's same
 * hour (clamped to [1/3, 3]); with less than a day of history, the last hour's peak window. Finite and ≥ 0.
 */
export function forecastPeak(series: Float64Array): number {
  const w = windows(series);
  const per = 60 / WINDOW_MIN;
  const n = w.length;
  if (n === 0) return series.length === 0 ? 0 : mean(series);
  const last = w.subarray(Math.max(0, n - per));
  const lastPeak = max(last);
  if (n < 24 * per + per) return lastPeak;
  const yesterdayNext = w.subarray(n - 24 * per, n - 23 * per);
  const yesterdaySame = w.subarray(n - 25 * per, n - 24 * per);
  const level = mean(yesterdaySame) > 0 ? mean(last) / mean(yesterdaySame) : 1;
  const f = max(yesterdayNext) * Math.min(3, Math.max(1 / 3, level));
  return Number.isFinite(f) && f >= 0 ? f : lastPeak;
}

function max(xs: Float64Array): number {
  let m = 0;
  for (const x of xs) if (x > m) m = x;
  return m;
}

function mean(xs: Float64Array): number {
  let s = 0;
  for (const x of xs) s += x;
  return xs.length === 0 ? 0 : s / xs.length;
}

export interface SeasonalPeakOptions {
  /** Per-region cover factor α and NIW buffer β (config planner.alpha / planner.beta). */
  alpha: number;
  beta: number;
}

export class SeasonalPeakPlanner implements HourlyPlanner {
  readonly name = "seasonal-peak (stand-in for planner/ ARIMA+ILP)";
  constructor(private readonly o: SeasonalPeakOptions) {}

  plan(input: PlannerInput): RegionTargets[] {
    const { config } = input.fleet;
    const out = new Map<RegionName, RegionTargets>();
    for (const r of config.regions) out.set(r.name, { decisionId: input.decisionId, region: r.name, madeAtMs: input.nowMs, advisory: false, endpoints: [] });
    const gpuFree = new Map<string, number>();
    for (const r of config.regions) for (const g of r.gpus) gpuFree.set(`${r.name}/${g.type}`, g.count);
    for (const m of config.models) {
      const eps = config.regions.flatMap((r) => r.endpoints.filter((e) => e.model === m.name).map((e) => ({ region: r.name, e })));
      const totalRegions = eps.length;
      const niw = this.o.beta * input.niwTokensPerSLastHour(m.name);
      const rows = eps.map(({ region, e }) => {
        const history = input.history(m.name, region);
        const f = forecastPeak(history) + niw / Math.max(1, totalRegions);
        const tps = input.tps(m.name, e.gpu);
        const need = (this.o.alpha * f) / tps;
        // No history yet (the first hour): hold what runs now rather than plan from nothing.
        const n = history.length === 0 ? input.current(m.name, region, e.gpu) : Math.ceil(need - 1e-9);
        return { region, e, f, tps, n: Math.min(e.maxInstances, Math.max(e.minInstances, n)), frac: f / tps };
      });
      const totalF = rows.reduce((s, x) => s + x.f, 0);
      let cover = rows.reduce((s, x) => s + x.n * x.tps, 0);
      while (cover < totalF && rows.some((x) => input.history(m.name, x.region).length > 0)) {
        let best: (typeof rows)[number] | undefined;
        for (const x of rows) if (x.n < x.e.maxInstances && (best === undefined || x.frac - x.n > best.frac - best.n)) best = x;
        if (best === undefined) break;
        best.n++;
        cover += best.tps;
      }
      for (const x of rows) {
        const key = `${x.region}/${x.e.gpu}`;
        const gpus = m.gpusPerInstance[x.e.gpu]!;
        const fit = Math.max(x.e.minInstances, Math.min(x.n, Math.floor(gpuFree.get(key)! / gpus)));
        gpuFree.set(key, gpuFree.get(key)! - fit * gpus);
        out.get(x.region)!.endpoints.push({ model: m.name, gpu: x.e.gpu, instances: fit, forecastTokensPerS: x.f });
      }
    }
    return [...out.values()];
  }
}

/** Planner choices of the replay: planner/ with its default forecaster (blend), with ARIMA, or the stand-in. */
export const PLANNER_NAMES = ["ilp", "ilp-arima", "seasonal-peak"] as const;
export type PlannerName = (typeof PLANNER_NAMES)[number];

/** The planner the replay runs every simulated hour (default: planner/ — forecast + HiGHS ILP). */
export async function createPlanner(fleet: FleetSpec, name: PlannerName = "ilp"): Promise<HourlyPlanner> {
  if (name === "seasonal-peak") return new SeasonalPeakPlanner({ alpha: fleet.config.planner.alpha, beta: fleet.config.planner.beta });
  const { IlpPlanner } = await import("./ilp-planner.js");
  return IlpPlanner.create(name === "ilp-arima" ? "arima" : "blend");
}
