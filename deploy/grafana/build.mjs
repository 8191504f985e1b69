// Writes tidegate.json, the Grafana dashboard (`node deploy/grafana/build.mjs`). The panels are data here so the
// JSON stays consistent; test/deploy/prometheus.test.ts checks every expression against a real Prometheus.
import { writeFileSync } from "node:fs";

const sel = 'region=~"$region", model=~"$model"';
let id = 0;
const panel = (title, gridPos, targets, fieldConfig = {}, options = {}) => ({
  id: ++id,
  type: "timeseries",
  title,
  datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" },
  gridPos,
  targets: targets.map(([expr, legendFormat], i) => ({ refId: String.fromCharCode(65 + i), expr, legendFormat, datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" } })),
  fieldConfig: { defaults: { ...fieldConfig }, overrides: [] },
  options: { legend: { displayMode: "table", placement: "right", calcs: ["lastNotNull", "max"] }, tooltip: { mode: "multi" }, ...options },
});
const q = (p) => [0.5, 0.9, 0.99].map((x) => [`histogram_quantile(${x}, sum by (le, region, model) (rate(${p}_bucket{${sel}}[$__rate_interval])))`, `p${x * 100} {{region}} {{model}}`]);
const W = 12;
const H = 8;
const row = (y, title) => ({ id: ++id, type: "row", title, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y }, panels: [] });

const panels = [
  row(0, "Requests"),
  panel("Request rate (router, by final status)", { h: H, w: W, x: 0, y: 1 }, [[`sum by (region, model, status) (rate(tidegate_router_requests_total{${sel}}[$__rate_interval]))`, "{{region}} {{model}} {{status}}"]], { unit: "reqps" }),
  panel("Request rate (regions, by outcome)", { h: H, w: W, x: W, y: 1 }, [[`sum by (region, model, outcome) (rate(tidegate_region_requests_total{${sel}}[$__rate_interval]))`, "{{region}} {{model}} {{outcome}}"]], { unit: "reqps" }),
  panel("Time to first token (p50 / p90 / p99)", { h: H, w: W, x: 0, y: 1 + H }, q("tidegate_router_ttft_seconds"), { unit: "s" }),
  panel("Time between tokens (p50 / p90 / p99)", { h: H, w: W, x: W, y: 1 + H }, q("tidegate_router_tbt_seconds"), { unit: "s" }),
  row(1 + 2 * H, "Capacity"),
  panel(
    "Effective memory utilization (routing threshold 0.70)",
    { h: H, w: W, x: 0, y: 2 + 2 * H },
    [
      [`max by (region, model) (tidegate_region_effective_memory_utilization{${sel}})`, "{{region}} {{model}}"],
      [`sum by (region, model) (tidegate_region_instances_stale{${sel}})`, "stale instances {{region}} {{model}}"],
    ],
    { unit: "percentunit", min: 0, thresholds: { mode: "absolute", steps: [{ color: "green", value: null }, { color: "red", value: 0.7 }] }, custom: { thresholdsStyle: { mode: "line+area" } } },
  ),
  panel(
    "Queue depth and oldest batch request",
    { h: H, w: W, x: W, y: 2 + 2 * H },
    [
      [`sum by (model) (tidegate_queue_depth{model=~"$model"})`, "batch queue {{model}}"],
      [`max by (model) (tidegate_queue_oldest_age_seconds{model=~"$model"})`, "oldest (s) {{model}}"],
      [`sum by (region, model) (tidegate_region_requests_waiting{${sel}})`, "waiting in engines {{region}} {{model}}"],
    ],
    {},
  ),
  panel(
    "Instances by state, with the planner's target",
    { h: H, w: W, x: 0, y: 2 + 3 * H },
    [
      [`sum by (region, model, state) (tidegate_region_instances{${sel}})`, "{{region}} {{model}} {{state}}"],
      [`max by (region, model) (tidegate_planner_target_instances{${sel}})`, "target {{region}} {{model}}"],
    ],
    { custom: { drawStyle: "line", lineInterpolation: "stepAfter" } },
  ),
  panel(
    "Forecast vs actual tokens/s",
    { h: H, w: W, x: W, y: 2 + 3 * H },
    [
      [`max by (region, model) (tidegate_planner_forecast_tokens_per_second{${sel}})`, "forecast {{region}} {{model}}"],
      [`sum by (region, model) (tidegate_region_tokens_per_second{${sel}})`, "actual {{region}} {{model}}"],
    ],
    { unit: "short" },
  ),
  row(2 + 4 * H, "Scaling"),
  panel(
    "Scaling actions and failures",
    { h: H, w: W, x: 0, y: 3 + 4 * H },
    [
      [`sum by (region, model, kind) (increase(tidegate_region_scaling_actions_total{${sel}}[$__rate_interval]))`, "{{kind}} {{region}} {{model}}"],
      [`sum by (region, model) (increase(tidegate_region_scaling_failures_total{${sel}}[$__rate_interval]))`, "failed {{region}} {{model}}"],
    ],
    { custom: { drawStyle: "bars" } },
  ),
  panel("Data-plane transfer rate (parameters to new instances)", { h: H, w: W, x: W, y: 3 + 4 * H }, [[`sum by (region) (rate(tidegate_region_transfer_bytes_total{region=~"$region"}[$__rate_interval]))`, "{{region}}"]], { unit: "Bps" }),
  panel(
    "Cold starts by source, held and refused requests (scale from zero)",
    { h: H, w: W, x: 0, y: 3 + 5 * H },
    [
      [`sum by (region, model, source) (increase(tidegate_region_cold_starts_total{${sel}}[$__rate_interval]))`, "cold start from {{source}} {{region}} {{model}}"],
      [`sum by (region, model) (tidegate_region_cold_held{${sel}})`, "held {{region}} {{model}}"],
      [`sum by (region, model, reason) (increase(tidegate_region_cold_refused_total{${sel}}[$__rate_interval]))`, "refused ({{reason}}) {{region}} {{model}}"],
    ],
    { custom: { drawStyle: "bars" } },
  ),
  panel("Cold-start TTFT (held requests; p50 / p90 / p99)", { h: H, w: W, x: W, y: 3 + 5 * H }, q("tidegate_region_cold_start_ttft_seconds"), { unit: "s" }),
  row(3 + 6 * H, "Batch"),
  panel(
    "Batch fill (preemptible KV) and preemptions",
    { h: H, w: W, x: 0, y: 4 + 6 * H },
    [
      [`max by (region, model) (tidegate_region_preemptible_memory_utilization{${sel}})`, "batch fill {{region}} {{model}}"],
      [`sum by (region, model) (increase(tidegate_region_preemptions_total{${sel}}[$__rate_interval]))`, "preemptions {{region}} {{model}}"],
    ],
    {},
  ),
  panel(
    "Batch output tokens/s by capacity, and batches at risk of their deadline",
    { h: H, w: W, x: W, y: 4 + 6 * H },
    [
      [`sum by (model, capacity) (rate(tidegate_queue_batch_tokens_total{model=~"$model"}[$__rate_interval]))`, "{{capacity}} {{model}}"],
      [`max by (model) (tidegate_queue_batches_at_risk{model=~"$model"})`, "at risk {{model}}"],
    ],
    {},
  ),
  row(5 + 7 * H, "Prefix caching"),
  panel(
    "Prefix-cache hit rate per region (hit / queried prompt tokens)",
    { h: H, w: W, x: 0, y: 6 + 7 * H },
    [[`sum by (region, model) (rate(tidegate_instance_prefix_cache_hits_tokens_total{${sel}}[$__rate_interval])) / sum by (region, model) (rate(tidegate_instance_prefix_cache_queries_tokens_total{${sel}}[$__rate_interval]))`, "{{region}} {{model}}"]],
    { unit: "percentunit", min: 0, max: 1 },
  ),
  panel(
    "Prefix-cache hit rate per instance",
    { h: H, w: W, x: W, y: 6 + 7 * H },
    [[`sum by (region, instance) (rate(tidegate_instance_prefix_cache_hits_tokens_total{${sel}}[$__rate_interval])) / sum by (region, instance) (rate(tidegate_instance_prefix_cache_queries_tokens_total{${sel}}[$__rate_interval]))`, "{{region}} {{instance}}"]],
    { unit: "percentunit", min: 0, max: 1 },
  ),
  row(6 + 8 * H, "Prefill/decode"),
  panel(
    "Serving instances by prefill/decode role",
    { h: H, w: W, x: 0, y: 7 + 8 * H },
    [[`sum by (region, model, role) (tidegate_region_serving_instances_by_role{${sel}})`, "{{role}} {{region}} {{model}}"]],
    { min: 0, decimals: 0 },
  ),
  // The regions' in-process KV fabric (engines/sim/kv-fabric.ts): its series carry the region only.
  panel(
    "KV pull time, prefill → decode (p50 / p99)",
    { h: H, w: W, x: W, y: 7 + 8 * H },
    [0.5, 0.99].map((x) => [`histogram_quantile(${x}, sum by (le, region) (rate(tidegate_region_kv_transfer_seconds_bucket{region=~"$region"}[$__rate_interval])))`, `p${x * 100} {{region}}`]),
    { unit: "s" },
  ),
  panel(
    "KV moved, prefill → decode (bytes/s; failed pulls/s)",
    { h: H, w: W, x: 0, y: 7 + 9 * H },
    [
      [`sum by (region) (rate(tidegate_region_kv_transfer_bytes_total{region=~"$region"}[$__rate_interval]))`, "bytes/s {{region}}"],
      [`sum by (region) (rate(tidegate_region_kv_transfer_failed_total{region=~"$region"}[$__rate_interval]))`, "failed/s {{region}}"],
    ],
    {},
  ),
];

const dashboard = {
  __inputs: [{ name: "DS_PROMETHEUS", label: "Prometheus", type: "datasource", pluginId: "prometheus", pluginName: "Prometheus" }],
  __requires: [
    { type: "grafana", id: "grafana", name: "Grafana", version: "9.0.0" },
    { type: "datasource", id: "prometheus", name: "Prometheus", version: "1.0.0" },
    { type: "panel", id: "timeseries", name: "Time series", version: "" },
  ],
  uid: "tidegate-overview",
  title: "tidegate",
  description: "tidegate per region and model: requests, TTFT/TBT, effective memory utilization vs the 0.70 routing threshold, queues, instances vs the planner's target, forecast vs actual, scaling, data-plane transfers, cold starts, prefix-cache hit rates and prefill/decode pools (deploy/grafana/README.md).",
  tags: ["tidegate", "llm-serving"],
  timezone: "utc",
  schemaVersion: 39,
  version: 1,
  editable: true,
  refresh: "10s",
  time: { from: "now-1h", to: "now" },
  templating: {
    list: [
      { name: "region", label: "region", type: "query", datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" }, query: { query: "label_values(tidegate_region_instances, region)", refId: "region" }, definition: "label_values(tidegate_region_instances, region)", includeAll: true, multi: true, allValue: ".*", current: { text: "All", value: "$__all" }, refresh: 2 },
      { name: "model", label: "model", type: "query", datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" }, query: { query: "label_values(tidegate_region_instances{region=~\"$region\"}, model)", refId: "model" }, definition: "label_values(tidegate_region_instances{region=~\"$region\"}, model)", includeAll: true, multi: true, allValue: ".*", current: { text: "All", value: "$__all" }, refresh: 2 },
    ],
  },
  annotations: { list: [] },
  panels,
};

writeFileSync(new URL("./tidegate.json", import.meta.url), JSON.stringify(dashboard, null, 2) + "\n");
