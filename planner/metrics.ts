/**
 * The planner process's Prometheus metrics, from each stored plan report: the targets it set and the point
 * forecast it made per (model, region) — what the dashboard overlays on the regions' instances and tokens/s — plus
 * plans made by solver status and region acknowledgements. Every (model, region) of the config starts at 0.
 */
import { Counter, Gauge, initLabels, type Registry } from "../core/metrics.js";
import type { PlanReport } from "./report.js";

const ACK_OUTCOMES = ["accepted", "refused"] as const;

/** Metrics of one planner replica, registered on `registry`. */
export class PlannerMetrics {
  private readonly target: Gauge<"model" | "region">;
  private readonly forecast: Gauge<"model" | "region">;
  private readonly plans: Counter<"status" | "advisory">;
  private readonly acks: Counter<"region" | "outcome">;
  private readonly lastPlan: Gauge;

  constructor(registry: Registry, models: readonly string[], regions: readonly string[]) {
    const registers = [registry];
    this.target = new Gauge({ name: "tidegate_planner_target_instances", help: "Instances the newest plan sets per (model, region), over all GPU types", labelNames: ["model", "region"], registers });
    this.forecast = new Gauge({ name: "tidegate_planner_forecast_tokens_per_second", help: "The newest plan's point forecast of peak tokens per second per (model, region) for its hour (mean peak + NIW buffer)", labelNames: ["model", "region"], registers });
    this.plans = new Counter({ name: "tidegate_planner_plans_total", help: "Plans this replica made, by solver status and whether advisory", labelNames: ["status", "advisory"], registers });
    this.acks = new Counter({ name: "tidegate_planner_target_acks_total", help: "Targets sent to a region, by whether the region accepted them", labelNames: ["region", "outcome"], registers });
    this.lastPlan = new Gauge({ name: "tidegate_planner_last_plan_timestamp_seconds", help: "Unix time of the newest plan this replica made or approved (0 before any)", registers });
    initLabels(this.target, { model: models, region: regions });
    initLabels(this.forecast, { model: models, region: regions });
    initLabels(this.acks, { region: regions, outcome: ACK_OUTCOMES });
    this.lastPlan.set(0);
  }

  /** Exports one stored report (a round's or an approval's). */
  observe(report: PlanReport): void {
    const targets = new Map<string, { model: string; region: string; n: number }>();
    for (const a of report.actions) {
      const k = `${a.model}\u0000${a.region}`;
      const t = targets.get(k) ?? { model: a.model, region: a.region, n: 0 };
      t.n += a.target;
      targets.set(k, t);
    }
    for (const t of targets.values()) this.target.set({ model: t.model, region: t.region }, t.n);
    for (const f of report.forecasts) this.forecast.set({ model: f.model, region: f.region }, f.pointDemandTokensPerS);
    if (report.review === undefined) this.plans.inc({ status: report.solver.status, advisory: String(report.advisory) });
    for (const a of report.acks) this.acks.inc({ region: a.region, outcome: a.accepted ? "accepted" : "refused" });
    this.lastPlan.set(report.madeAtMs / 1000);
  }
}
