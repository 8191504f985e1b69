/**
 * One planning run (DESIGN "Planner — per hour"): read each (model, region)'s history, forecast the next hour's
 * peak (guarded; fallback reasons kept), add β × last hour's NIW tokens/s, build and solve the ILP, derive spot
 * actions, and assemble the report, including what could not be met and, for a fleet with an SLO, the capacity per
 * instance at it with its correction and the attainment since the last plan (slo-round.ts sloReport). Pure apart from the injected history,
 * forecaster and solver; time comes in as `nowMs`.
 */
import { newId } from "../core/ids.js";
import type { DemandHistory } from "../forecasts/history.js";
import { DAY_MS, MINUTE_MS } from "../forecasts/history.js";
import type { Forecaster } from "../forecasts/forecaster.js";
import { downsampleMean, fillGaps } from "../forecasts/series.js";
import type { Fleet } from "./fleet.js";
import { buildIlp, type Demand } from "./ilp.js";
import { poolDemand, splitPoolModel } from "./pools.js";
import type { PlanAction, PlanCost, PlanReport, SeriesForecast, Unmet } from "./report.js";
import { solvePlan, type SolvePlanOptions } from "./solve.js";
import type { Solver } from "../core/solver.js";
import { spotActions } from "./spot.js";
import { lastHourError } from "./last-hour.js";
import { sloReport, type SloRoundFacts } from "./slo-round.js";

/** Forecasts run on 10-minute windows (6 per hour, 144 per day). */
export const WINDOW_MS = 600_000;
const HOUR_STEPS = 6;
const DAY_STEPS = 144;

/** Inputs of one planning run. */
export interface PlanRunInputs {
  fleet: Fleet;
  history: DemandHistory;
  forecaster: Forecaster;
  solver: Solver;
  nowMs: number;
  decisionId: number;
  intervalMs?: number;
  advisory?: boolean;
  strategy?: string;
  /** The previous report, for last hour's forecast error (last-hour.ts). */
  previous?: PlanReport;
  /** More earlier reports (any order), e.g. the loop's recent ones: last hour's error uses the newest whose hour ended. */
  recent?: readonly PlanReport[];
  solve?: SolvePlanOptions;
  /** Progress lines (stderr in the CLI). */
  onProgress?: (msg: string) => void;
  /** "relative" when the history's times are offsets from a trace start, not calendar times. */
  timeBase?: "calendar" | "relative";
  trigger?: PlanReport["trigger"];
  /** The round's SLO telemetry and corrections (service.ts planRound); absent offline. */
  slo?: SloRoundFacts;
}

/** The (model, region) pairs to plan: every endpoint's pair plus every pair with recorded history. */
async function pairs(fleet: Fleet, history: DemandHistory): Promise<{ model: string; region: string }[]> {
  const seen = new Map<string, { model: string; region: string }>();
  for (const r of fleet.regions) {
    for (const e of r.endpoints) {
      // A disaggregated model's pools share its (model, region) series (pools.ts).
      const model = splitPoolModel(e.model).model;
      seen.set(`${model}\t${r.name}`, { model, region: r.name });
    }
  }
  for (const k of await history.keys()) seen.set(`${k.model}\t${k.region}`, { model: k.model, region: k.region });
  return [...seen.values()];
}

/** Runs one plan; never throws on bad demand data (it is reported), only on a broken fleet or solver. */
export async function runPlan(inp: PlanRunInputs): Promise<PlanReport> {
  const { fleet, history, forecaster, nowMs } = inp;
  const warnings: string[] = [...(inp.slo?.warnings ?? [])];
  const endMs = Math.floor(nowMs / WINDOW_MS) * WINDOW_MS;
  const fromMs = endMs - 8 * DAY_MS;
  const forecasts: SeriesForecast[] = [];
  const demand: Demand[] = [];
  const list = await pairs(fleet, history);
  let done = 0;
  // Each pair is independent: forecast up to 8 at a time (ARIMA jobs queue on the worker pool), results kept in order.
  const results: { demand: Demand; forecast?: SeriesForecast; warnings: string[] }[] = new Array(list.length);
  const one = async (idx: number): Promise<void> => {
    const { model, region } = list[idx]!;
    const warnings: string[] = [];
    const iwMinutes = await history.series({ kind: "iw", model, region }, fromMs, endMs);
    const niwMinutes = await history.series({ kind: "niw", model, region }, endMs - 3_600_000, endMs);
    const windows = downsampleMean(iwMinutes, WINDOW_MS / MINUTE_MS);
    // Drop leading windows before the first recorded minute (a series that started recently is short, not zero).
    const first = windows.findIndex((v) => Number.isFinite(v));
    const niwKnown = niwMinutes.filter((v) => Number.isFinite(v));
    const niw = niwKnown.length > 0 ? niwKnown.reduce((s, v) => s + v, 0) / niwKnown.length : 0;
    const buffer = fleet.beta * niw;
    if (first === -1) {
      warnings.push(`${model}@${region}: no interactive history in the last 8 days; planned for the NIW buffer (${buffer.toFixed(1)} tokens/s) only`);
      results[idx] = { demand: { model, region, tokensPerS: buffer }, warnings };
      return;
    }
    const raw = windows.slice(first);
    const gapWindows = raw.filter((v) => !Number.isFinite(v)).length;
    const values = fillGaps(raw, DAY_STEPS);
    if (gapWindows > 0) warnings.push(`${model}@${region}: ${gapWindows} ten-minute window(s) without data were filled (seasonal or interpolated)`);
    let f;
    try {
      f = await forecaster.forecast({ values, stepMs: WINDOW_MS, seasonSteps: DAY_STEPS, horizonSteps: HOUR_STEPS, series: { model, region, fromMs: endMs } });
    } catch (err) {
      warnings.push(`${model}@${region}: cannot forecast (${err instanceof Error ? err.message : String(err)}); planned on the last hour's peak`);
      const p = Math.max(...values.slice(-HOUR_STEPS));
      f = { steps: Array.from({ length: HOUR_STEPS }, () => ({ mean: p, lower: p, upper: p })), peak: { mean: p, lower: p, upper: p }, method: "last-hour-peak", fallbackReason: String(err) };
    }
    const last = await lastHourError({ model, region, nowMs, intervalMs: inp.intervalMs ?? 3_600_000, earlier: [...(inp.previous === undefined ? [] : [inp.previous]), ...(inp.recent ?? [])], history });
    // F(m, r): the peak the ILP covers (the upper bound by default, see PlannerConfig.provisionFor) + β buffer.
    const d = ((fleet.provisionFor ?? "upper") === "upper" ? f.peak.upper : f.peak.mean) + buffer;
    results[idx] = { demand: { model, region, tokensPerS: d }, warnings, forecast: {
      model,
      region,
      method: f.method,
      ...(f.fallbackReason === undefined ? {} : { fallbackReason: f.fallbackReason }),
      peak: f.peak,
      niwLastHourTokensPerS: niw,
      bufferTokensPerS: buffer,
      demandTokensPerS: d,
      pointDemandTokensPerS: f.peak.mean + buffer,
      historyWindows: values.slice(-2 * DAY_STEPS),
      stepMs: WINDOW_MS,
      forecastSteps: f.steps,
      lastHour: last.lastHour,
      ...(last.note === undefined ? {} : { lastHourNote: last.note }),
      gapWindowsFilled: gapWindows,
      ...(f.components === undefined ? {} : { components: f.components.map((c) => ({ name: c.name, weight: c.weight, recentMapePct: Number.isFinite(c.recentMapePct) ? c.recentMapePct : null, origins: c.origins })) }),
    } };
    done++;
    if (done % 50 === 0) inp.onProgress?.(`forecast ${done}/${list.length} series`);
  };
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(8, list.length) }, async () => {
    while (next < list.length) await one(next++);
  }));
  for (const r of results) {
    demand.push(r.demand);
    if (r.forecast !== undefined) forecasts.push(r.forecast);
    warnings.push(...r.warnings);
  }
  inp.onProgress?.(`building ILP over ${fleet.regions.reduce((s, r) => s + r.endpoints.length, 0)} endpoints`);
  const model = buildIlp(fleet, poolDemand(fleet, demand));
  const sol = solvePlan(model, inp.solver, inp.solve);
  inp.onProgress?.(`solved by ${sol.path} in ${sol.solveMs.toFixed(0)} ms (gap ${(100 * sol.gap).toFixed(2)}%)`);
  const { actions, regions } = spotActions(fleet, model.endpoints, sol.targets);
  const unmet = unmetOf(fleet, model, sol.targets);
  let hold = 0;
  let starts = 0;
  model.endpoints.forEach((e, i) => {
    hold += e.holdCost * sol.targets[i]!;
    starts += e.startCost * Math.max(0, sol.targets[i]! - e.current);
  });
  const breakdown = costBreakdown(fleet, actions, hold, starts, model.penalty);
  breakdown.spotDonatedGpus = regions.reduce((s, r) => s + r.donatedGpus, 0);
  const slo = sloReport(fleet, inp.slo);
  return {
    id: `plan-${inp.decisionId}-${newId("").slice(0, 8)}`,
    decisionId: inp.decisionId,
    madeAtMs: nowMs,
    intervalMs: inp.intervalMs ?? 3_600_000,
    advisory: inp.advisory ?? false,
    ...(inp.strategy === undefined ? {} : { strategy: inp.strategy }),
    alpha: fleet.alpha,
    beta: fleet.beta,
    forecasts,
    solver: { path: sol.path, status: sol.status, objective: sol.objective, bound: sol.bound, gap: sol.gap, solveMs: sol.solveMs, ...(sol.iterations === undefined ? {} : { iterations: sol.iterations }), endpoints: model.endpoints.length },
    actions,
    spot: regions,
    cost: { holdPerInterval: hold, starts, total: hold + starts, currency: fleet.currency ?? "USD", breakdown },
    unmet,
    warnings,
    acks: [],
    ...(inp.timeBase === undefined ? {} : { timeBase: inp.timeBase }),
    ...(inp.trigger === undefined ? {} : { trigger: inp.trigger }),
    ...(slo === undefined ? {} : { slo }),
  };
}

/** What the spot actions make of the ILP's cost: VM starts only for new VMs, model starts for new and redeployed. */
function costBreakdown(fleet: Fleet, actions: PlanAction[], holding: number, starts: number, penalty: number): NonNullable<PlanCost["breakdown"]> {
  let vmStarts = 0;
  let modelStarts = 0;
  let reclaimed = 0;
  for (const a of actions) {
    const mg = fleet.models[a.model]?.[a.gpu];
    const g = fleet.gpus[a.gpu];
    if (mg === undefined || g === undefined) continue;
    const vm = a.newInstances * g.vmStartPerGpu * mg.gpusPerInstance;
    const load = (a.newInstances + a.reclaimOtherModel) * mg.modelStartCost;
    vmStarts += vm;
    modelStarts += load;
    reclaimed += a.reclaimSameModel + a.reclaimOtherModel;
    a.cost = g.holdPerGpu * mg.gpusPerInstance * a.target + vm + load;
  }
  return { holding, vmStarts, modelStarts, spotSaved: Math.max(0, starts - vmStarts - modelStarts), spotReclaimedInstances: reclaimed, spotDonatedGpus: 0, afterSpot: holding + vmStarts + modelStarts, unmetPenaltyPerTokenPerS: penalty };
}

/** What the targets leave uncovered (cover and global rows) or over capacity (minimums above capacity). */
function unmetOf(fleet: Fleet, model: ReturnType<typeof buildIlp>, targets: Int32Array): Unmet[] {
  const out: Unmet[] = [];
  const byMr = new Map<string, number>();
  const byM = new Map<string, number>();
  const gpusUsed = new Map<string, number>();
  model.endpoints.forEach((e, i) => {
    byMr.set(`${e.model}\t${e.region}`, (byMr.get(`${e.model}\t${e.region}`) ?? 0) + targets[i]! * e.tokensPerS);
    byM.set(e.model, (byM.get(e.model) ?? 0) + targets[i]! * e.tokensPerS);
    gpusUsed.set(`${e.region}\t${e.gpu}`, (gpusUsed.get(`${e.region}\t${e.gpu}`) ?? 0) + targets[i]! * e.gpusPerInstance);
  });
  model.rows.forEach((row, r) => {
    const need = model.rowDemand[r]!;
    if (row.kind === "cover") {
      const short = need - (byMr.get(`${row.model}\t${row.region}`) ?? 0);
      if (short > 1e-6) {
        const hasEndpoint = model.endpoints.some((e) => e.model === row.model && e.region === row.region);
        out.push({ kind: "cover", model: row.model!, region: row.region!, amount: short, why: hasEndpoint ? `α·F = ${need.toFixed(1)} tokens/s exceeds what capacity and maxInstances allow in ${row.region}` : `${row.model} has no endpoint in ${row.region}` });
      }
    } else if (row.kind === "global") {
      const short = need - (byM.get(row.model!) ?? 0);
      if (short > 1e-6) {
        const any = model.endpoints.some((e) => e.model === row.model);
        out.push({ kind: "global", model: row.model!, amount: short, why: any ? `total demand ${need.toFixed(1)} tokens/s exceeds the capacity available to ${row.model} in every region` : `${row.model} has no endpoint (no capacity) anywhere in the fleet` });
      }
    } else {
      const cap = fleet.regions.find((x) => x.name === row.region)!.capacity[row.gpu!]!;
      const over = (gpusUsed.get(`${row.region}\t${row.gpu}`) ?? 0) - cap;
      if (over > 0) out.push({ kind: "capacity", region: row.region!, gpu: row.gpu!, amount: over, why: `minInstances need ${over} more ${row.gpu} GPUs than ${row.region} has` });
    }
  });
  return out;
}
