/** The plan report (DESIGN "Plan report"): what one planning run saw, forecast, decided and why. JSON for machines. */
import type { ModelSlo } from "../core/config/slo-section.js";
import type { RequestMix } from "../core/perf/slo-capacity.js";
import type { Band } from "../forecasts/forecaster.js";
import type { MixSource } from "./capacity.js";
import type { Correction } from "./slo-correction.js";
import type { EndpointAction, RegionSpot } from "./spot.js";
import type { PlanFleet } from "./fingerprint.js";

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
  /**
   * Last hour: an earlier plan's peak forecast for this series vs the peak actually recorded in the hour it planned,
   * computed only once that hour has ended (null otherwise: `lastHourNote` says why).
   */
  lastHour: LastHourError | null;
  /** Why `lastHour` is null: "not-yet" while the hour an earlier plan covered is still running; "none" otherwise. */
  lastHourNote?: { state: "not-yet" | "none"; why: string };
  /** 10-minute windows filled because no minute in them was recorded. */
  gapWindowsFilled: number;
  /**
   * A combining forecaster's parts (the default's predictors and its ARIMA): each one's weight in the point forecast
   * and its own peak MAPE over the recent origins the weights were fitted on (null: none). Absent for other methods.
   */
  components?: ReportComponent[];
}

/** One part of a combined forecast, as the report shows it. */
export interface ReportComponent {
  name: string;
  weight: number;
  recentMapePct: number | null;
  /** Origins `recentMapePct` is over. */
  origins: number;
}

/**
 * The forecast error of an hour that has ended: the peak an earlier plan forecast for it vs the highest 10-minute
 * mean recorded in it. errorPct = 100 × (forecast − actual) / actual (+ = forecast too high).
 */
export interface LastHourError {
  forecastPeak: number;
  actualPeak: number;
  errorPct: number;
  /** The plan judged and the hour it planned, [hourStartMs, hourEndMs) (absent on reports made before they were kept). */
  planId?: string;
  hourStartMs?: number;
  hourEndMs?: number;
  /** 10-minute windows of that hour with recorded load, of `windows`: the actual peak is over these only. */
  recordedWindows?: number;
  windows?: number;
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

/** One endpoint's change in the report: the spot actions plus what the data plane expects a scale-out to take. */
export type PlanAction = EndpointAction & {
  /** Expected time for one more instance to serve here, ms (from the data plane; absent until it reports one). */
  expectedScaleOutMs?: number;
  /** This endpoint's share of `cost.breakdown.afterSpot` (holding + its starts after spot), in the plan's currency. */
  cost?: number;
};

/**
 * The plan's cost for its interval, in `currency` (GPU-hour prices; hourly plans cost this per hour).
 * `total` = `holdPerInterval` + `starts` is what the ILP charged (every added instance as a VM start + a model
 * start); `breakdown` splits what the spot actions make of it: instances reclaimed from spot skip the starts.
 */
export interface PlanCost {
  holdPerInterval: number;
  starts: number;
  total: number;
  currency?: string;
  breakdown?: {
    holding: number;
    /** VM starts for new instances (vmStartPerGpu × GPUs). */
    vmStarts: number;
    /** Model loads: new instances and instances redeployed from another model's spot. */
    modelStarts: number;
    /** Start costs the ILP counted but spot reclaims avoid (≥ 0). */
    spotSaved: number;
    spotReclaimedInstances: number;
    spotDonatedGpus: number;
    /** holding + vmStarts + modelStarts: what this plan costs once the spot actions are taken. */
    afterSpot: number;
    /** The ILP's price per token/s of demand left unmet (the objective's third term). */
    unmetPenaltyPerTokenPerS: number;
  };
}

/**
 * One model's SLO in the report (issue 31): its targets, each GPU type's capacity per instance at them (how it was
 * derived and the correction applied), and how the SLO was met since the previous plan.
 */
export interface ModelSloReport {
  model: string;
  slo: ModelSlo;
  capacity: InstanceCapacity[];
  /** The live correction factor this plan applied to every GPU type of the model (slo-correction.ts), and why. */
  correction: Correction;
  /** The interactive requests judged since the previous plan; null when the round had no telemetry (e.g. offline). */
  lastHour: SloAttainment | null;
}

/** tps(m, g) as the ILP used it, for one GPU type of a model. */
export interface InstanceCapacity {
  gpu: string;
  gpusPerInstance: number;
  /** What the ILP used: predictedTokensPerS × the correction factor. */
  tokensPerS: number;
  predictedTokensPerS: number;
  /** Present when capacityAtSlo derived it (absent when a fleet file gave tokensPerS); requestsPerS before the correction. */
  requestsPerS?: number;
  batch?: number;
  mix?: RequestMix & { source: MixSource };
  /** One line: how the capacity was derived, or where it was given. */
  derivation: string;
}

/** How a model's interactive requests met its SLO over a span of telemetry (the regions' clocks). */
export interface SloAttainment {
  fromMs: number;
  toMs: number;
  requests: number;
  met: number;
  /** met / requests; null when no request ended ("no requests"). */
  attainment: number | null;
  /** Request-weighted tokens/s per serving instance, and the finished requests' mean size, when measured. */
  tokensPerSPerInstance?: number;
  mix?: RequestMix;
}

/** An operator's decision on an advisory plan (`/plans/{id}/approve` or `/reject`). */
export interface PlanReview {
  state: "approved" | "rejected";
  /** Who decided: the name given at sign-in and the key's role and fingerprint (never the key). */
  by: string;
  atMs: number;
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
  actions: PlanAction[];
  spot: RegionSpot[];
  cost: PlanCost;
  unmet: Unmet[];
  warnings: string[];
  /** Region acknowledgements of the targets (empty in advisory mode or offline, until approved). */
  acks: { region: string; decisionId: number; accepted: boolean; error?: string }[];
  /** "relative" when the history had no calendar (e.g. ServeGen's seconds from the trace start): times are hours from 0. */
  timeBase?: "calendar" | "relative";
  /** "manual" when someone asked for it (plan now), with who; "offline" for `tidegate plan` (never sent). */
  trigger?: { kind: "schedule" | "manual" | "offline"; by?: string };
  /** Advisory plans: approved (sent to the regions) or rejected, with who and when; absent = awaiting review. */
  review?: PlanReview;
  /** Per model: the SLO, the capacity per instance at it, the correction factor, last hour's attainment (absent on reports before issue 31 and for fleets without an SLO). */
  slo?: ModelSloReport[];
  /** The configuration it was made for (fingerprint.ts): set by the planner's round, absent offline and on older reports. */
  fleet?: PlanFleet;
}
