/**
 * The week replay's shared types: its options and the books of one run (filled by books.ts and the loop in
 * replay.ts, read by result.ts). In a module of their own so that neither of those imports the other.
 */
import type { VirtualClock } from "../../core/clock.js";
import type { SimLoadingCounters } from "../../region/runtime/sim-loading.js";
import type { LedgerTotals } from "../../region/actuator/ledger.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import type { WorkloadSummary } from "../workload/generator.js";
import type { WorkloadSpec } from "../workload/spec.js";
import type { FleetSpec } from "./fleet.js";
import type { Histogram, HistogramSeries } from "./histogram.js";
import type { HourlyPlanner } from "./planner-input.js";
import type { RegionTargets } from "../../core/ports.js";
import type { ModelSlo } from "../../core/config.js";

export interface WeekOptions {
  fleet: FleetSpec;
  workload: WorkloadSpec;
  strategy: string;
  strategyParams?: Record<string, number>;
  planner: HourlyPlanner;
  /** Virtual time after the last arrival to let in-flight work finish (ms, default 1 h). */
  tailMs?: number;
  /** Called about every `progressEveryRequests` requests with the fraction done. */
  onProgress?: (p: { fraction: number; requests: number; virtualMs: number }) => void;
  progressEveryRequests?: number;
  /** Include per-minute p95 TTFT per model in the result (burst analysis). */
  minuteSeries?: boolean;
  /**
   * Days of demand history the planner has when the replay starts (default 1): the same clients' requests of the
   * preceding ServeGen day(s), generated at the same rate scale and only recorded (a running system has history;
   * without it the first hours plan from nothing).
   */
  warmupDays?: number;
}

/** What result.ts needs of one region: its name and every scaling action it took. */
export interface RegionBooks {
  readonly name: string;
  readonly actions: readonly ControllerAction[];
  /** The region's loading source, when config gives one (region/runtime/sim-loading.ts SimRegionLoading). */
  readonly loading?: { readonly settings: { readonly source: string }; readonly scheduler: string; readonly counters: Readonly<SimLoadingCounters> };
}

/** The books of one run. */
export interface RunState {
  o: WeekOptions;
  clock: VirtualClock;
  regions: RegionBooks[];
  models: string[];
  durationMs: number;
  ttft: Histogram[];
  e2e: Histogram[];
  ttftHourly: HistogramSeries[];
  /** Per model: TPOT (time per output token after the first) of requests with ≥ 2 output tokens. */
  tpot: Histogram[];
  /** Per model, the SLO it is held to (config `slo`, core/config/slo-section.ts). */
  slo: ModelSlo[];
  /** [model][hour]: interactive requests arrived in that hour (ended or never served) and those that met the SLO. */
  sloHourly: { requests: Float64Array; met: Float64Array }[];
  /** Per-minute TTFT histograms, only with `minuteSeries` (empty otherwise: a week of them is ~340 MB). */
  ttftMinute: HistogramSeries[];
  /** [model][region][hour]: Σ over minute samples of active (serving + deploying + draining) instances. */
  activeSamples: Float64Array[][];
  tokensHourly: Float64Array[];
  iw: number;
  iwUnserved: number;
  /** Batch requests; `duplicates`: finished again after their lease ran out and they were sent a second time. */
  niw: { submitted: number; done: number; withinDeadline: number; late: number; duplicates: number; pendingByDeadlineHour: Int32Array };
  plans: { hour: number; decisionId: number; acks: number; endpoints: RegionTargets["endpoints"][] }[];
  plannerMs: number;
  wallMs: number;
  /** Per region: the ledger's per-model totals at the end of the run (before the tail). */
  ledgers: Map<string, LedgerTotals>[];
  summary: WorkloadSummary;
}
