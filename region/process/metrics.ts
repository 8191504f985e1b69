/**
 * The region process's Prometheus metrics: request outcomes per model (every model × outcome starts at 0) and
 * gauges copied from each telemetry snapshot (effective memory utilization, tokens/s, queue lengths, instances by
 * state) plus the newest accepted targets decisionId.
 */
import { Counter, Gauge, createRegistry, initLabels, type Registry } from "../../core/metrics.js";
import type { RegionTelemetry } from "../../core/ports.js";
import type { RequestOutcome } from "../gateway/gateway.js";

const OUTCOMES: readonly RequestOutcome[] = ["ok", "error", "cancelled"];
const STATES = ["provisioning", "loading", "serving", "draining", "spot"] as const;

/** Metrics of one region process. */
export class RegionMetrics {
  readonly registry: Registry;
  private readonly requests: Counter<"model" | "outcome">;
  private readonly utilization: Gauge<"model">;
  private readonly tokensPerS: Gauge<"model">;
  private readonly running: Gauge<"model">;
  private readonly waiting: Gauge<"model">;
  private readonly instances: Gauge<"model" | "state">;
  private readonly stale: Gauge<"model">;
  private readonly decisionId: Gauge;
  private readonly actions: Counter<"model" | "kind">;
  private readonly failures: Counter<"model">;
  private readonly transferBytes: Counter;

  constructor(models: readonly string[], processMetrics = true) {
    this.registry = createRegistry(processMetrics);
    const r = [this.registry];
    this.requests = new Counter({ name: "tidegate_region_requests_total", help: "Requests finished by the region gateway, by outcome", labelNames: ["model", "outcome"], registers: r });
    this.utilization = new Gauge({ name: "tidegate_region_effective_memory_utilization", help: "KV in use / KV available over serving instances (0..1)", labelNames: ["model"], registers: r });
    this.tokensPerS = new Gauge({ name: "tidegate_region_tokens_per_second", help: "Prompt + output tokens served per second over the telemetry window", labelNames: ["model"], registers: r });
    this.running = new Gauge({ name: "tidegate_region_requests_running", help: "Requests in running batches", labelNames: ["model"], registers: r });
    this.waiting = new Gauge({ name: "tidegate_region_requests_waiting", help: "Requests waiting for admission", labelNames: ["model"], registers: r });
    this.instances = new Gauge({ name: "tidegate_region_instances", help: "Instances by lifecycle state", labelNames: ["model", "state"], registers: r });
    this.stale = new Gauge({ name: "tidegate_region_instances_stale", help: "Serving instances whose engine stats (/metrics) could not be read lately: routed around, counted as full", labelNames: ["model"], registers: r });
    this.decisionId = new Gauge({ name: "tidegate_region_targets_decision_id", help: "decisionId of the newest accepted targets (-1 before any)", registers: r });
    this.actions = new Counter({ name: "tidegate_region_scaling_actions_total", help: "Scaling steps the region controller took, by kind (provision, reclaim, redeploy, drain)", labelNames: ["model", "kind"], registers: r });
    this.failures = new Counter({ name: "tidegate_region_scaling_failures_total", help: "Scale-outs that failed (the endpoint then backs off)", labelNames: ["model"], registers: r });
    this.transferBytes = new Counter({ name: "tidegate_region_transfer_bytes_total", help: "Parameter bytes moved to new instances' nodes over the data plane", registers: r });
    initLabels(this.actions, { model: models, kind: ["provision", "reclaim", "redeploy", "drain"] });
    initLabels(this.failures, { model: models });
    initLabels(this.requests, { model: models, outcome: OUTCOMES });
    for (const g of [this.utilization, this.tokensPerS, this.running, this.waiting, this.stale]) initLabels(g, { model: models });
    initLabels(this.instances, { model: models, state: STATES });
    this.decisionId.set(-1);
  }

  /** Counts one finished request. */
  outcome(model: string, outcome: RequestOutcome): void {
    this.requests.inc({ model, outcome });
  }

  /** Counts one scaling step (RuntimeMetricsSink). */
  action(model: string, kind: string): void {
    this.actions.inc({ model, kind });
  }

  /** Counts one failed scale-out (RuntimeMetricsSink). */
  failure(model: string): void {
    if (model !== "-") this.failures.inc({ model });
  }

  /** Counts parameter bytes that reached target nodes. */
  transferred(bytes: number): void {
    this.transferBytes.inc(bytes);
  }

  /** Copies a telemetry snapshot into the gauges. */
  observe(t: RegionTelemetry, decisionId: number | undefined): void {
    for (const m of t.models) {
      this.utilization.set({ model: m.model }, m.effectiveMemoryUtilization);
      this.tokensPerS.set({ model: m.model }, m.tokensPerS);
      this.running.set({ model: m.model }, m.running);
      this.waiting.set({ model: m.model }, m.waiting);
      this.stale.set({ model: m.model }, m.staleInstances ?? 0);
      for (const s of STATES) this.instances.set({ model: m.model, state: s }, m.instances[s]);
    }
    this.decisionId.set(decisionId ?? -1);
  }
}
