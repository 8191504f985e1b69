/**
 * The global router's Prometheus metrics. Every (model, region, status) combination the router can report is
 * initialised to 0 at start (core/metrics initLabels), so rates and alerts work from the first scrape.
 */
import { Counter, Gauge, Histogram, createRegistry, initLabels, type Registry } from "../core/metrics.js";
import { WATCHDOG_REASONS } from "./watchdog.js";
import type { ConcurrencyLimiter } from "./concurrency.js";
import { REGION_CHOICE_REASONS } from "./relay.js";

/** Region label for requests that never reached a region (bad input, no region available). */
export const NO_REGION = "none";
/** Model label for requests naming no known model (keeps label cardinality bounded). */
export const UNKNOWN_MODEL = "unknown";
/** Status label values: HTTP status classes of the final outcome. */
export const STATUS_LABELS = ["200", "400", "401", "403", "404", "413", "429", "499", "500", "502", "503"] as const;

export interface RouterMetrics {
  registry: Registry;
  /** Completed requests by model, region and final HTTP status (a stream that failed after its 200 counts as 200). */
  requests: Counter<"model" | "region" | "status">;
  /** Seconds from request receipt to the first token the client is sent. */
  ttftSeconds: Histogram<"model" | "region">;
  /** Seconds between successive output tokens of a stream (per token when a chunk carries several). */
  tbtSeconds: Histogram<"model" | "region">;
  /** Requests whose client went away before the end (upstream dispatch aborted). */
  aborts: Counter<"model" | "region">;
  /** Region failures before the first token that were retried in the next region. */
  retries: Counter<"model" | "region">;
  /** Socket write errors on client responses (never swallowed: counted, logged, upstream aborted). */
  writeErrors: Counter;
  /** Streams open right now. */
  inflight: Gauge<"model">;
  /** Output tokens relayed to clients. */
  tokens: Counter<"model" | "region">;
  /** Streams that failed after the first token (client got 200, then an in-stream error). */
  streamErrors: Counter<"model" | "region">;
  /**
   * Upstream waits the watchdog gave up (watchdog.ts): `stalled` (a stream silent past its stall limit while its region
   * reports), `region_stalled` (a running stream silent while its region stopped reporting), `region_down` (before
   * the first token: retried elsewhere).
   */
  watchdogFired: Counter<"region" | "reason">;
  /**
   * Requests shed with 429 before dispatch: `tenant` (per-tenant in-flight limit), `global` (router-wide limit),
   * `concurrency` (every region's adaptive limit reached), `tenant_share` (the tenant beyond its fair share), `slo` (no
   * region that may serve it predicts a first token within the model's TTFT SLO: router.spill, spill.ts).
   */
  shed: Counter<"model" | "limit">;
  /**
   * Interactive requests by the region that served their first token and why it was chosen (relay.ts
   * REGION_CHOICE_REASONS: nearest, memory-threshold, least-utilized, prefix, slo-spill, cold, cold-sooner,
   * concurrency, retry); the same reason is the response's `x-tidegate-region-reason` header.
   */
  regionChoices: Counter<"region" | "reason">;
  /** Each (region, model)'s adaptive concurrency limit (concurrency.ts); set when /metrics is read. */
  concurrencyLimit: Gauge<"region" | "model">;
  /** Interactive requests in flight per (region, model) as the limiter counts them; set when /metrics is read. */
  concurrencyInflight: Gauge<"region" | "model">;
  /** Cuts of each (region, model)'s limit (queueing seen); set when /metrics is read. */
  concurrencyCuts: Gauge<"region" | "model">;
}

/**
 * Creates the registry and the metrics, with every label combination of `models` × `regions` (plus the
 * no-region label for early failures) started at 0. `defaults` adds process metrics.
 */
export function createRouterMetrics(models: readonly string[], regions: readonly string[], defaults = true, limiter?: ConcurrencyLimiter): RouterMetrics {
  const registry = createRegistry(defaults);
  const requests = new Counter({ name: "tidegate_router_requests_total", help: "Requests by model, region and final HTTP status", labelNames: ["model", "region", "status"] as const, registers: [registry] });
  const ttftSeconds = new Histogram({
    name: "tidegate_router_ttft_seconds",
    help: "Time from request receipt to the first token sent to the client",
    labelNames: ["model", "region"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const tbtSeconds = new Histogram({
    name: "tidegate_router_tbt_seconds",
    help: "Time between successive output tokens sent to a streaming client",
    labelNames: ["model", "region"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1],
    registers: [registry],
  });
  const aborts = new Counter({ name: "tidegate_router_client_aborts_total", help: "Requests cancelled because the client disconnected", labelNames: ["model", "region"] as const, registers: [registry] });
  const retries = new Counter({ name: "tidegate_router_retries_total", help: "Region failures before the first token, retried in the next region", labelNames: ["model", "region"] as const, registers: [registry] });
  const writeErrors = new Counter({ name: "tidegate_router_write_errors_total", help: "Errors writing a response to a client socket", registers: [registry] });
  const inflight = new Gauge({ name: "tidegate_router_inflight_requests", help: "Requests being served now", labelNames: ["model"] as const, registers: [registry] });
  const tokens = new Counter({ name: "tidegate_router_output_tokens_total", help: "Output tokens relayed to clients", labelNames: ["model", "region"] as const, registers: [registry] });

  const streamErrors = new Counter({ name: "tidegate_router_stream_errors_total", help: "Streams that failed after the first token (in-stream error after a 200)", labelNames: ["model", "region"] as const, registers: [registry] });
  const watchdogFired = new Counter({ name: "tidegate_router_watchdog_fired_total", help: "Upstream waits given up: stalled (silent past the stream's stall limit), region_stalled (silent while its region stopped reporting), region_down (before the first token; retried elsewhere)", labelNames: ["region", "reason"] as const, registers: [registry] });
  const shed = new Counter({ name: "tidegate_router_shed_total", help: "Requests refused with 429 by an in-flight limit: tenant, global, concurrency (every region at its adaptive limit), tenant_share (beyond the tenant's fair share), slo (no region predicts a first token within the TTFT SLO)", labelNames: ["model", "limit"] as const, registers: [registry] });
  const regionChoices = new Counter({ name: "tidegate_router_region_choices_total", help: "Interactive requests by the region that served their first token and why it was chosen (nearest, memory-threshold, least-utilized, prefix, slo-spill, cold, cold-sooner, concurrency, retry)", labelNames: ["region", "reason"] as const, registers: [registry] });
  // The limiter's state is read when /metrics is scraped (one collect for the three gauges).
  const collect = () => {
    if (limiter === undefined) return;
    for (const { region, model, limit } of limiter.entries()) {
      const st = limit.state();
      concurrencyLimit.set({ region, model }, st.limit);
      concurrencyInflight.set({ region, model }, st.inflight);
      concurrencyCuts.set({ region, model }, st.cuts);
    }
  };
  const concurrencyLimit: Gauge<"region" | "model"> = new Gauge({ name: "tidegate_router_concurrency_limit", help: "Adaptive concurrency limit on interactive requests per region and model", labelNames: ["region", "model"] as const, registers: [registry], collect });
  const concurrencyInflight = new Gauge({ name: "tidegate_router_concurrency_inflight", help: "Interactive requests in flight per region and model, as the adaptive limit counts them", labelNames: ["region", "model"] as const, registers: [registry] });
  const concurrencyCuts = new Gauge({ name: "tidegate_router_concurrency_cuts", help: "Times each region and model's adaptive limit was cut because its requests queued", labelNames: ["region", "model"] as const, registers: [registry] });
  const regionLabels = [...regions, NO_REGION];
  initLabels(streamErrors, { model: models, region: regions });
  initLabels(watchdogFired, { region: regions, reason: [...WATCHDOG_REASONS] });
  initLabels(shed, { model: [...models, UNKNOWN_MODEL], limit: ["tenant", "global", "concurrency", "tenant_share", "slo"] });
  initLabels(regionChoices, { region: regions, reason: [...REGION_CHOICE_REASONS] });
  initLabels(requests, { model: [...models, UNKNOWN_MODEL], region: regionLabels, status: STATUS_LABELS });
  initLabels(aborts, { model: models, region: regions });
  initLabels(retries, { model: models, region: regions });
  initLabels(tokens, { model: models, region: regions });
  initLabels(inflight, { model: models });
  writeErrors.inc(0);
  for (const model of models) for (const region of regions) {
    ttftSeconds.zero({ model, region });
    tbtSeconds.zero({ model, region });
  }
  return { registry, requests, ttftSeconds, tbtSeconds, aborts, retries, writeErrors, inflight, tokens, streamErrors, watchdogFired, shed, regionChoices, concurrencyLimit, concurrencyInflight, concurrencyCuts };
}
