/** The plan report (DESIGN "Plan report"): what one planning run saw, forecast, decided and why. JSON for machines. */
import type { Band } from "../forecasts/forecaster.js";
import type { EndpointAction, RegionSpot } from "./spot.js";

/** What the report shows for one (model, region). */
export interface SeriesForecast {
  model: string;
  region: string;
  method: string;
  fallbackReason?: string;
  /** Peak IW tokens/s forecast for the next hour with its 10%–90% interval. */
  peak: Band;
  /** Last hour's mean NIW tokens/s and the β buffer added (β × it). */
  niwLastHourTokensPerS: number;
  bufferTokensPerS: number;
  /** F(m, r) = peak.upper (or peak.mean, fleet.provisionFor) + buffer: what the ILP covers. */
  demandTokensPerS: number;
  /** peak.mean + buffer: what the point forecast alone asks for (sets each target's floor). */
  pointDemandTokensPerS: number;
  /** The last 48 h of 10-minute IW windows (for the chart), oldest first, and the forecast steps. */
  historyWindows: number[];
  stepMs: number;
  forecastSteps: Band[];
  /** Last hour: the previous plan's peak forecast vs the actual peak (null when either is unknown). */
  lastHour: { forecastPeak: number; actualPeak: number; errorPct: number } | null;
  /** 10-minute windows filled because no minute in them was recorded. */
  gapWindowsFilled: number;
}

/** Something the plan could not satisfy, and why. */
export interface Unmet {
  kind: "cover" | "global" | "capacity";
  model?: string;
  region?: string;
  gpu?: string;
  /** Tokens/s that could not be covered (cover/global) or GPUs over capacity. */
  amount: number;
  why: string;
}

/** One planning run, as served at /plans/{id} and written by `tidegate plan`. */
export interface PlanReport {
  id: string;
  decisionId: number;
  madeAtMs: number;
  /** The hour planned: [madeAtMs, madeAtMs + intervalMs). */
  intervalMs: number;
  advisory: boolean;
  /** Which region strategy paces the plan (from the config), if known. */
  strategy?: string;
  alpha: number;
  beta: number;
  forecasts: SeriesForecast[];
  solver: { path: string; status: string; objective: number; bound: number; gap: number; solveMs: number; iterations?: number; endpoints: number };
  actions: EndpointAction[];
  spot: RegionSpot[];
  cost: { holdPerInterval: number; starts: number; total: number };
  unmet: Unmet[];
  warnings: string[];
  /** Region acknowledgements of the targets (empty in advisory mode or offline). */
  acks: { region: string; decisionId: number; accepted: boolean; error?: string }[];
}
