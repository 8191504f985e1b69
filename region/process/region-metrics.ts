/**
 * Region metrics in Prometheus: request outcomes per model (every model × outcome starts at 0), gauges copied from
 * each telemetry snapshot (effective memory utilization, tokens/s, queue lengths, instances by state, stale
 * instances), the newest accepted targets decisionId and the controller's scaling actions, failures and data-plane
 * bytes. Every series carries a `region` label, so one registry can hold several regions (`tidegate dev`) and a
 * dashboard can split by region without relabelling.
 *
 * SLO attainment of interactive requests (issue 31; region/gateway/slo-book.ts): judged requests by outcome (met,
 * missed, unserved) as the gateway judges them, and gauges read from the gateway's SLO summaries at each scrape —
 * attainment over the last hour (NaN while the hour judged none), the targets, and the completed clock hours whose
 * attainment was below the SLO percentile.
 *
 * Scale from zero (issue 33): cold starts by where the parameters came from (host copy, peer, origin), the TTFT of
 * the requests held for one, and held requests refused (hold full, held `holdMs`, or the region could not start the
 * model: no_capacity, not_placed, cold_start_failed — issue 50).
 */
import { Counter, Gauge, Histogram, createRegistry, initLabels, type Registry } from "../../core/metrics.js";
import { LOAD_SOURCES, type LoadSource } from "../actuator/port.js";
import type { RegionTelemetry } from "../../core/ports.js";
import type { InstancePrefixStats, InstanceView, RequestOutcome } from "../gateway/gateway.js";
import { COLD_REFUSALS, type ColdRefusal } from "../gateway/cold-hold.js";
import { SLO_OUTCOMES, type ModelSloSummary, type SloOutcome } from "../gateway/slo-book.js";

/** Seconds (as engine-sim's tidegate_kv_transfer_seconds). */
const KV_TRANSFER_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const OUTCOMES: readonly RequestOutcome[] = ["ok", "error", "cancelled"];
const STATES = ["provisioning", "loading", "serving", "draining", "spot"] as const;
/** Prefill/decode roles (region/gateway/roles.ts). */
const ROLES = ["prefill", "decode", "both"] as const;
const ACTION_KINDS = ["provision", "reclaim", "redeploy", "drain"] as const;

/** What one region reports into RegionMetrics (the gateway's outcomes, the runtime's actions, telemetry). */
export interface RegionMetricsSink {
  /** Counts one finished request. */
  outcome(model: string, outcome: RequestOutcome): void;
  /** Counts one interactive request judged against its SLO. */
  slo(model: string, outcome: SloOutcome): void;
  /** Where the SLO gauges are read from at each scrape (the region's Gateway.sloSummaries); the latest call wins. */
  watchSlo(read: () => readonly ModelSloSummary[]): void;
  /** Where the per-instance prefix-cache counters are read from at each scrape (Gateway.prefixStats). */
  watchPrefix(read: () => readonly InstancePrefixStats[]): void;
  /** Where the instances and their prefill/decode roles are read from at each scrape (Gateway.instances). */
  watchInstances(read: () => readonly InstanceView[]): void;
  /** Counts one scaling step (RuntimeMetricsSink). */
  action(model: string, kind: string): void;
  /** Counts one failed scale-out (RuntimeMetricsSink); model "-" is not counted. */
  failure(model: string): void;
  /** Counts parameter bytes that reached target nodes. */
  transferred(bytes: number): void;
  /** Counts one cold start (a model's first instance from zero) by its parameters' source. */
  coldStart(model: string, source: LoadSource): void;
  /** One KV pull of the region's in-process prefill/decode engines ended (engines/sim/kv-fabric.ts): its time and bytes. */
  kvPulled(ms: number, bytes: number): void;
  /** One such pull failed. */
  kvPullFailed(): void;
  /** Observes one held request's TTFT (ms, from entering the gateway). */
  coldTtft(model: string, ttftMs: number): void;
  /** Counts one held request refused. */
  coldRefused(model: string, reason: ColdRefusal): void;
  /** Copies a telemetry snapshot into the gauges. */
  observe(t: RegionTelemetry, decisionId: number | undefined): void;
}

/** Metrics of one or more regions on one registry. */
export class RegionMetrics {
  readonly registry: Registry;
  private readonly requests: Counter<"region" | "model" | "outcome">;
  private readonly utilization: Gauge<"region" | "model">;
  private readonly batchUtilization: Gauge<"region" | "model">;
  private readonly preemptions: Counter<"region" | "model">;
  /** Per `region|model`: the engines' preemption total in the last report (the counter adds what it grew by). */
  private readonly lastPreemptions = new Map<string, number>();
  private readonly tokensPerS: Gauge<"region" | "model">;
  private readonly batchTokensPerS: Gauge<"region" | "model">;
  private readonly demandTokensPerS: Gauge<"region" | "model">;
  private readonly running: Gauge<"region" | "model">;
  private readonly waiting: Gauge<"region" | "model">;
  private readonly instances: Gauge<"region" | "model" | "state">;
  private readonly stale: Gauge<"region" | "model">;
  private readonly decisionId: Gauge<"region">;
  private readonly actions: Counter<"region" | "model" | "kind">;
  private readonly failures: Counter<"region" | "model">;
  private readonly transferBytes: Counter<"region">;
  private readonly kvTransferSeconds: Histogram<"region">;
  private readonly kvTransferBytes: Counter<"region">;
  private readonly kvTransferFailed: Counter<"region">;
  private readonly sloRequests: Counter<"region" | "model" | "outcome">;
  private readonly coldStarts: Counter<"region" | "model" | "source">;
  private readonly coldTtftSeconds: Histogram<"region" | "model">;
  private readonly coldRefusedTotal: Counter<"region" | "model" | "reason">;
  private readonly coldHeld: Gauge<"region" | "model">;
  private readonly sloAttainment: Gauge<"region" | "model">;
  private readonly sloTarget: Gauge<"region" | "model" | "kind">;
  private readonly sloViolatedHours: Gauge<"region" | "model">;
  /** Per region, its gateway's per-instance prefix-cache counters (watchPrefix). */
  private readonly prefixReaders = new Map<string, () => readonly InstancePrefixStats[]>();
  /** Per region, its gateway's instances (watchInstances). */
  private readonly instanceReaders = new Map<string, () => readonly InstanceView[]>();
  private readonly byRole: Gauge<"region" | "model" | "role">;
  /** Per region, its gateway's SLO summaries (watchSlo). */
  private readonly sloReaders = new Map<string, () => readonly ModelSloSummary[]>();

  /**
   * `regions` maps each region to its models (every label combination starts at 0); `registry` defaults to a
   * fresh one with the process's standard metrics.
   */
  constructor(regions: Readonly<Record<string, readonly string[]>>, registry: Registry = createRegistry(true)) {
    this.registry = registry;
    const r = [this.registry];
    this.requests = new Counter({ name: "tidegate_region_requests_total", help: "Requests finished by the region gateway, by outcome", labelNames: ["region", "model", "outcome"], registers: r });
    this.utilization = new Gauge({ name: "tidegate_region_effective_memory_utilization", help: "KV in use / KV available over serving instances (0..1; stale instances count as full)", labelNames: ["region", "model"], registers: r });
    this.batchUtilization = new Gauge({ name: "tidegate_region_preemptible_memory_utilization", help: "The part of tidegate_region_effective_memory_utilization that batch work the engines would preempt holds: how far batch fills the region (0 where the engines do not preempt)", labelNames: ["region", "model"], registers: r });
    this.preemptions = new Counter({ name: "tidegate_region_preemptions_total", help: "Batch requests the model's engines preempted for interactive ones (from their vllm:num_preemptions_total)", labelNames: ["region", "model"], registers: r });
    this.tokensPerS = new Gauge({ name: "tidegate_region_tokens_per_second", help: "Prompt + output tokens served per second over the telemetry window", labelNames: ["region", "model"], registers: r });
    this.batchTokensPerS = new Gauge({ name: "tidegate_region_batch_tokens_per_second", help: "The part of tidegate_region_tokens_per_second that batch requests took", labelNames: ["region", "model"], registers: r });
    this.demandTokensPerS = new Gauge({ name: "tidegate_region_demand_tokens_per_second", help: "Prompt + max output tokens per second of the requests entering the region's gateway (LT-UA's observed traffic)", labelNames: ["region", "model"], registers: r });
    this.running = new Gauge({ name: "tidegate_region_requests_running", help: "Requests in running batches", labelNames: ["region", "model"], registers: r });
    this.waiting = new Gauge({ name: "tidegate_region_requests_waiting", help: "Requests waiting for admission", labelNames: ["region", "model"], registers: r });
    this.instances = new Gauge({ name: "tidegate_region_instances", help: "Instances by lifecycle state", labelNames: ["region", "model", "state"], registers: r });
    this.stale = new Gauge({ name: "tidegate_region_instances_stale", help: "Serving or draining instances whose engine stats (/metrics) could not be read lately: routed around, counted as full", labelNames: ["region", "model"], registers: r });
    this.decisionId = new Gauge({ name: "tidegate_region_targets_decision_id", help: "decisionId of the newest accepted targets (-1 before any)", labelNames: ["region"], registers: r });
    this.actions = new Counter({ name: "tidegate_region_scaling_actions_total", help: "Scaling steps the region controller took, by kind (provision, reclaim, redeploy, drain)", labelNames: ["region", "model", "kind"], registers: r });
    this.failures = new Counter({ name: "tidegate_region_scaling_failures_total", help: "Scale-outs that failed (the endpoint then backs off)", labelNames: ["region", "model"], registers: r });
    this.kvTransferSeconds = new Histogram({ name: "tidegate_region_kv_transfer_seconds", help: "Time a decode instance of the region's in-process engines took to pull a request's KV from its prefill instance, from the ask (prefill/decode disaggregation; engine-sim processes export tidegate_kv_transfer_seconds)", labelNames: ["region"], buckets: KV_TRANSFER_BUCKETS, registers: r });
    this.kvTransferBytes = new Counter({ name: "tidegate_region_kv_transfer_bytes_total", help: "KV bytes moved from prefill to decode instances of the region's in-process engines", labelNames: ["region"], registers: r });
    this.kvTransferFailed = new Counter({ name: "tidegate_region_kv_transfer_failed_total", help: "KV pulls of the region's in-process decode instances that failed (KV not held, timeout)", labelNames: ["region"], registers: r });
    this.transferBytes = new Counter({ name: "tidegate_region_transfer_bytes_total", help: "Parameter bytes moved to new instances' nodes over the data plane", labelNames: ["region"], registers: r });
    this.sloRequests = new Counter({ name: "tidegate_region_slo_requests_total", help: "Interactive requests judged against the model's SLO: met (TTFT and TPOT within targets), missed (late, or broke after the first token), unserved (refused or failed before the first token)", labelNames: ["region", "model", "outcome"], registers: r });
    this.coldStarts = new Counter({ name: "tidegate_region_cold_starts_total", help: "Cold starts (a model's first instance after none served), by where its parameters came from: host (the node's own host copy), peer (multicast from another node), origin", labelNames: ["region", "model", "source"], registers: r });
    this.coldTtftSeconds = new Histogram({ name: "tidegate_region_cold_start_ttft_seconds", help: "Time to first token of the requests held for a cold start, from entering the region's gateway", labelNames: ["region", "model"], buckets: [0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120], registers: r });
    this.coldRefusedTotal = new Counter({ name: "tidegate_region_cold_refused_total", help: "Requests held for a cold start and refused with 503: reason full (controller.scaleToZero.maxHeld) or timeout (holdMs), both model_cold unless the region knew why, or the region could not start the model: no_capacity, not_placed, cold_start_failed", labelNames: ["region", "model", "reason"], registers: r });
    this.coldHeld = new Gauge({ name: "tidegate_region_cold_held", help: "Requests held now while the model scales from zero", labelNames: ["region", "model"], registers: r });
    const readSlo = (set: (region: string, s: ModelSloSummary) => void) => () => {
      for (const [region, read] of this.sloReaders) for (const s of read()) set(region, s);
    };
    this.sloAttainment = new Gauge({
      name: "tidegate_region_slo_attainment",
      help: "Met / judged interactive requests over the last hour (60 one-minute buckets of the region clock); NaN while the hour judged none",
      labelNames: ["region", "model"],
      registers: r,
      collect: readSlo((region, s) => this.sloAttainment.set({ region, model: s.model }, s.lastHourAttainment ?? Number.NaN)),
    });
    this.sloTarget = new Gauge({
      name: "tidegate_region_slo_target_seconds",
      help: "The model's SLO targets (config slo), in seconds: kind ttft = time to first token, tpot = time per output token after the first",
      labelNames: ["region", "model", "kind"],
      registers: r,
      collect: readSlo((region, s) => {
        this.sloTarget.set({ region, model: s.model, kind: "ttft" }, s.ttftMs / 1000);
        this.sloTarget.set({ region, model: s.model, kind: "tpot" }, s.tpotMs / 1000);
      }),
    });
    // Prefix caching (issue 34): each instance's vLLM prefix_cache_queries / prefix_cache_hits as the gateway last read
    // them; the hit rate per instance or per region is rate(hits) / rate(queries) (deploy/grafana). An instance that
    // leaves takes its series with it (reset at each scrape).
    const prefixReaders = this.prefixReaders;
    const prefixCounter = (name: string, help: string, read: (s: InstancePrefixStats) => number) =>
      new Counter({
        name,
        help,
        labelNames: ["region", "model", "instance"],
        registers: r,
        collect() {
          this.reset();
          for (const [region, readAll] of prefixReaders) for (const s of readAll()) this.inc({ region, model: s.model, instance: s.instanceId }, read(s));
        },
      });
    prefixCounter("tidegate_instance_prefix_cache_queries_tokens_total", "Prompt tokens the instance's engine looked up in its prefix cache (vllm:prefix_cache_queries_total), since the engine started", (s) => s.queriedTokens);
    prefixCounter("tidegate_instance_prefix_cache_hits_tokens_total", "Prompt tokens the instance's engine found in its prefix cache (vllm:prefix_cache_hits_total), since the engine started", (s) => s.hitTokens);
    const instanceReaders = this.instanceReaders;
    this.byRole = new Gauge({
      name: "tidegate_region_serving_instances_by_role",
      help: "Serving instances by prefill/decode role (issue 48): prefill, decode, or both (plain requests)",
      labelNames: ["region", "model", "role"],
      registers: r,
      collect() {
        for (const [region, read] of instanceReaders) {
          const counts = new Map<string, number>();
          for (const i of read()) if (i.state === "serving") counts.set(`${i.model}\u0000${i.role}`, (counts.get(`${i.model}\u0000${i.role}`) ?? 0) + 1);
          for (const model of regions[region] ?? []) for (const role of ROLES) this.set({ region, model, role }, counts.get(`${model}\u0000${role}`) ?? 0);
        }
      },
    });
    this.sloViolatedHours = new Gauge({
      name: "tidegate_region_slo_violations",
      help: "Completed clock hours since the region started (the first partly seen) whose SLO attainment was below the model's percentile (hours in violation)",
      labelNames: ["region", "model"],
      registers: r,
      collect: readSlo((region, s) => this.sloViolatedHours.set({ region, model: s.model }, s.violatedHours)),
    });
    for (const [region, models] of Object.entries(regions)) {
      const reg = [region];
      initLabels(this.actions, { region: reg, model: models, kind: ACTION_KINDS });
      initLabels(this.failures, { region: reg, model: models });
      initLabels(this.preemptions, { region: reg, model: models });
      initLabels(this.requests, { region: reg, model: models, outcome: OUTCOMES });
      for (const g of [this.utilization, this.batchUtilization, this.tokensPerS, this.batchTokensPerS, this.demandTokensPerS, this.running, this.waiting, this.stale]) initLabels(g, { region: reg, model: models });
      initLabels(this.instances, { region: reg, model: models, state: STATES });
      initLabels(this.byRole, { region: reg, model: models, role: ROLES });
      initLabels(this.sloRequests, { region: reg, model: models, outcome: SLO_OUTCOMES });
      initLabels(this.coldStarts, { region: reg, model: models, source: LOAD_SOURCES });
      initLabels(this.coldRefusedTotal, { region: reg, model: models, reason: COLD_REFUSALS });
      initLabels(this.coldHeld, { region: reg, model: models });
      for (const model of models) this.coldTtftSeconds.zero({ region, model });
      initLabels(this.sloTarget, { region: reg, model: models, kind: ["ttft", "tpot"] });
      initLabels(this.sloViolatedHours, { region: reg, model: models });
      // Not 0: an attainment of 0 would read as every request missed before any was judged.
      for (const model of models) this.sloAttainment.set({ region, model }, Number.NaN);
      this.decisionId.set({ region }, -1);
      this.transferBytes.inc({ region }, 0);
      this.kvTransferBytes.inc({ region }, 0);
      this.kvTransferFailed.inc({ region }, 0);
      this.kvTransferSeconds.zero({ region });
    }
  }

  /** The sink one region reports through. */
  sink(region: string): RegionMetricsSink {
    return {
      outcome: (model, outcome) => this.requests.inc({ region, model, outcome }),
      slo: (model, outcome) => this.sloRequests.inc({ region, model, outcome }),
      watchSlo: (read) => {
        this.sloReaders.set(region, read);
      },
      watchPrefix: (read) => {
        this.prefixReaders.set(region, read);
      },
      watchInstances: (read) => {
        this.instanceReaders.set(region, read);
      },
      action: (model, kind) => this.actions.inc({ region, model, kind }),
      failure: (model) => {
        if (model !== "-") this.failures.inc({ region, model });
      },
      transferred: (bytes) => this.transferBytes.inc({ region }, bytes),
      kvPulled: (ms, bytes) => {
        this.kvTransferSeconds.observe({ region }, ms / 1000);
        this.kvTransferBytes.inc({ region }, bytes);
      },
      kvPullFailed: () => this.kvTransferFailed.inc({ region }),
      coldStart: (model, source) => this.coldStarts.inc({ region, model, source }),
      coldTtft: (model, ttftMs) => this.coldTtftSeconds.observe({ region, model }, ttftMs / 1000),
      coldRefused: (model, reason) => this.coldRefusedTotal.inc({ region, model, reason }),
      observe: (t, decisionId) => {
        for (const m of t.models) {
          const l = { region, model: m.model };
          this.utilization.set(l, m.effectiveMemoryUtilization);
          this.batchUtilization.set(l, m.preemptibleMemoryUtilization ?? 0);
          // What the engines' total grew by since the last report; after it drops (an engine restarted or left), from
          // the new total: a preemption is counted once, or (on a drop) not at all, never twice.
          const key = `${region}|${m.model}`;
          const total = m.preemptionsTotal ?? 0;
          const last = this.lastPreemptions.get(key) ?? 0;
          if (total > last) this.preemptions.inc(l, total - last);
          this.lastPreemptions.set(key, total);
          this.tokensPerS.set(l, m.tokensPerS);
          this.batchTokensPerS.set(l, m.batchTokensPerS ?? 0);
          this.demandTokensPerS.set(l, m.demandTokensPerS ?? 0);
          this.running.set(l, m.running);
          this.waiting.set(l, m.waiting);
          this.stale.set(l, m.staleInstances ?? 0);
          this.coldHeld.set(l, m.cold?.held ?? 0);
          for (const s of STATES) this.instances.set({ ...l, state: s }, m.instances[s]);
        }
        this.decisionId.set({ region }, decisionId ?? -1);
      },
    };
  }
}
